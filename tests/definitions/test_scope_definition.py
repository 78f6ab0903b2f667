"""Issue 31 item 1 in the definitions: a loop's `[scope]` read into `Loop.scope`, and its mistakes
as `path:line` problems from `loopctl validate` (exit 2, no traceback)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import invoke

from loopctl.definitions import load_project
from loopctl.definitions.scope import ScopeSpec

CONFIG = 'version = 1\n\n[defaults]\nmaker = "maker"\n'


def project(repo: Path, scope: str) -> Path:
    (repo / ".loop" / "loops").mkdir(parents=True)
    (repo / ".loop" / "config.toml").write_text(CONFIG)
    (repo / ".loop" / "loops" / "css.toml").write_text('prompt = "Fix the CSS."\n' + scope)
    (repo / "agents").mkdir()
    (repo / "agents" / "maker.toml").write_text('backend = "command"\nargv = ["true"]\n')
    return repo


def test_a_scope_is_read_whole(repo: Path) -> None:
    project(
        repo,
        '\n[scope]\npaths = ["styles/**"]\ncommands = ["npx stylelint *"]\n'
        'hosts = ["registry.npmjs.org", "*.example.com:443"]\ntools = ["Read", "Edit"]\n'
        "max_files = 5\nmax_lines = 300\n",
    )
    assert load_project(repo).loops["css"].scope == ScopeSpec(
        paths=("styles/**",),
        commands=("npx stylelint *",),
        hosts=("registry.npmjs.org", "*.example.com:443"),
        tools=("Read", "Edit"),
        max_files=5,
        max_lines=300,
    )


def test_a_loop_without_a_scope_declares_none(repo: Path) -> None:
    project(repo, "")
    assert not load_project(repo).loops["css"].scope.declared


@pytest.mark.parametrize(
    ("body", "line", "message"),
    [
        ('hosts = ["not a host"]', 6, "'not a host' is not a host"),
        ("max_lines = 0", 6, "'max_lines' in [scope] must be at least 1, not 0"),
        ('path = ["styles/**"]', 6, "unknown key 'path' in [scope] (did you mean 'paths'?)"),
        ('paths = ["../elsewhere/**"]', 6, "must stay inside the repository"),
        ("tools = 3", 6, "'tools' in [scope] must be a list of strings, not an integer"),
    ],
)
def test_scope_mistakes_are_path_line_problems(
    repo: Path, monkeypatch: pytest.MonkeyPatch, body: str, line: int, message: str
) -> None:
    project(repo, f"\n\n\n[scope]\n{body}\n")

    result = invoke(monkeypatch, repo, "validate")

    output = result.stdout + result.stderr
    assert result.exit_code == 2, output
    assert "Traceback" not in output
    assert f".loop/loops/css.toml:{line}: " in output
    assert message in output
