"""`loopctl init`: scaffold a repository, never overwrite, detect the agent CLIs on PATH."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from loopctl.cli.app import app
from loopctl.paths import TEMPLATES

CLAUDE_FILES = [
    ".loop/config.toml",
    ".loop/loops/example.toml",
    ".loop/.gitignore",
    "agents/claude-maker.toml",
    "agents/claude-checker.toml",
    "skills/fix-ci/SKILL.md",
    "skills/triage-issue/SKILL.md",
    "skills/review-diff/SKILL.md",
]


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty folder that is the whole PATH, so no real agent CLI is detected."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))
    return folder


def fake_cli(folder: Path, name: str, *, executable: bool = True) -> None:
    script = folder / name
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755 if executable else 0o644)


def invoke(cwd: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(app, list(args))
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def files_under(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and ".git" not in path.relative_to(root).parts
    }


def test_init_in_a_fresh_repository(
    repo: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = invoke(repo, monkeypatch, "init")
    assert result.exit_code == 0, result.output
    created = [line.split()[1] for line in result.stdout.splitlines() if line.startswith("created")]
    assert created == CLAUDE_FILES
    assert "skipped" not in result.stdout
    assert "no agent CLI found on PATH" in result.stdout
    assert sorted(files_under(repo)) == sorted([*CLAUDE_FILES, "README.md"])

    config = tomllib.loads((repo / ".loop" / "config.toml").read_text())
    # No agent CLI to judge prose goals with: no default checker (a built-in goal needs none).
    assert config["defaults"] == {"maker": "claude-maker"}
    assert '# checker = "claude-checker"' in (repo / ".loop" / "config.toml").read_text()
    assert (repo / ".loop" / ".gitignore").read_text() == (TEMPLATES / "gitignore").read_text()
    for relative in CLAUDE_FILES:
        if relative.startswith(("agents/", "skills/")):
            shipped = TEMPLATES / relative
            assert (repo / relative).read_bytes() == shipped.read_bytes(), relative

    checked = invoke(repo, monkeypatch, "validate")
    assert checked.exit_code == 0, checked.output
    assert checked.stdout == "ok: 1 loops, 2 agents, 3 skills\n"


def test_init_from_a_subdirectory_writes_at_the_root(
    repo: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nested = repo / "src" / "pkg"
    nested.mkdir(parents=True)
    result = invoke(nested, monkeypatch, "init")
    assert result.exit_code == 0, result.output
    assert (repo / ".loop" / "config.toml").is_file()
    assert not (nested / ".loop").exists()


def test_init_never_overwrites(repo: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = {
        ".loop/config.toml": b'# my own config\nversion = 1\n[defaults]\nmaker = "claude-maker"\n',
        "agents/claude-maker.toml": b'description = "mine"\nbackend = "claude"\nmodel = "opus"\n',
        "skills/fix-ci/SKILL.md": b"---\nname: fix-ci\ndescription: My own way.\n---\nMine.\n",
        ".loop/loops/example.toml": b'prompt = "my loop"\n',
    }
    for relative, content in mine.items():
        (repo / relative).parent.mkdir(parents=True, exist_ok=True)
        (repo / relative).write_bytes(content)

    result = invoke(repo, monkeypatch, "init")
    assert result.exit_code == 0, result.output
    for relative, content in mine.items():
        assert (repo / relative).read_bytes() == content, relative
        assert f"skipped  {relative} (already exists)" in result.stdout
    created = [line.split()[1] for line in result.stdout.splitlines() if line.startswith("created")]
    assert created == [f for f in CLAUDE_FILES if f not in mine]

    # A second run changes nothing at all and reports every file as skipped.
    before = files_under(repo)
    again = invoke(repo, monkeypatch, "init")
    assert again.exit_code == 0, again.output
    assert files_under(repo) == before
    assert "created" not in again.stdout
    skipped = [line.split()[1] for line in again.stdout.splitlines() if line.startswith("skipped")]
    assert skipped == CLAUDE_FILES


def test_init_leaves_a_symlink_alone(
    repo: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.toml"
    (repo / "agents").mkdir()
    (repo / "agents" / "claude-maker.toml").symlink_to(outside)  # dangling: must not be followed
    result = invoke(repo, monkeypatch, "init")
    assert result.exit_code == 0, result.output
    assert "skipped  agents/claude-maker.toml" in result.stdout
    assert not outside.exists()


def test_init_outside_a_repository(
    tmp_path: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    # Guard: if some parent were a repository, init would (rightly) write there.
    assert not any((folder / ".git").exists() for folder in (plain, *plain.parents))
    result = invoke(plain, monkeypatch, "init")
    assert result.exit_code == 1
    assert result.stderr.startswith("loopctl: not a git repository")
    assert "git init" in result.stderr
    assert result.stdout == ""
    assert list(plain.iterdir()) == []


def test_init_detects_agent_clis_on_path(
    repo: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_cli(bin_dir, "codex")
    fake_cli(bin_dir, "aider")
    fake_cli(bin_dir, "goose", executable=False)  # not executable: not installed
    result = invoke(repo, monkeypatch, "init")
    assert result.exit_code == 0, result.output
    assert "agent CLIs found: codex, aider; default maker: codex-maker" in result.stdout

    agents = sorted(p.name for p in (repo / "agents").iterdir())
    assert agents == [
        "aider-checker.toml",
        "aider-maker.toml",
        "codex-checker.toml",
        "codex-maker.toml",
    ]
    config = tomllib.loads((repo / ".loop" / "config.toml").read_text())
    assert config["defaults"] == {"maker": "codex-maker", "checker": "codex-checker"}
    assert "$" not in (repo / ".loop" / "config.toml").read_text()

    checked = invoke(repo, monkeypatch, "validate")
    assert checked.exit_code == 0, checked.output
    assert checked.stdout == "ok: 1 loops, 4 agents, 3 skills\n"


def test_init_with_no_cli_writes_claude_agents(
    repo: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_cli(bin_dir, "codex", executable=False)
    result = invoke(repo, monkeypatch, "init")
    assert result.exit_code == 0, result.output
    agents = sorted(p.name for p in (repo / "agents").iterdir())
    assert agents == ["claude-checker.toml", "claude-maker.toml"]
    config = tomllib.loads((repo / ".loop" / "config.toml").read_text())
    assert config["defaults"] == {"maker": "claude-maker"}
