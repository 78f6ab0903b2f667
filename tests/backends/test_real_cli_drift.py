"""Issue 31 item 1 with the real Claude Code and Codex CLIs: footprints read from their streams.

The scripted model server (tests/support/real_cli_scripts.py) has Claude Code fix the link colour
in styles/site.css, then stray: a Bash command that appends to db/schema.sql, or db/scratch.sql
written with Write and removed with Bash `rm` (the diff then shows nothing of it). The loop
declares `[scope] paths = ["styles/**"]`, so loopctl asks Claude Code for its `stream-json`,
reads each tool call from it, pauses the task naming the step, and commits nothing. The CLI runs
in loopctl's sandbox with a temporary HOME, sealed in a loopback-only namespace where possible
(tests/support/real_clis.py). Codex (`exec --json`) is given the Bash variant through its shell
tool; opencode (`run --format json`) both, through its own `bash`, `write` and `edit` tools.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.journal import events
from support.real_cli_scripts import SCHEMA_LINE
from support.real_clis import Sandbox, cli_environment, make_sandbox, run_sealed, use_real_maker
from support.repos import PY, commit_all, git, toml_value, write_loop

CHECK = "import pathlib, sys; sys.exit('red' in pathlib.Path('styles/site.css').read_text())"
# Bash runs without asking (acceptEdits alone would deny it): the stray command really runs.
BASH = 'args = ["--allowedTools", "Bash"]\n'
APPEND = f"printf '%s\\n' '{SCHEMA_LINE}'"  # one command: the `;` inside is quoted


def css_site(repo: Path, name: str = "claude", box: Sandbox | None = None) -> None:
    box = box or make_sandbox()
    (repo / "styles").mkdir()
    (repo / "styles" / "site.css").write_text("a { color: red; }\n")
    (repo / "db").mkdir()
    (repo / "db" / "schema.sql").write_text("CREATE TABLE users (id INTEGER PRIMARY KEY);\n")
    use_real_maker(repo, name, box, extra=BASH if name == "claude" else "")
    write_loop(
        repo,
        "css",
        'prompt = "Fix the link colour in styles/site.css"\n'
        '\n[scope]\npaths = ["styles/**"]\ncommands = ["ls *", "cat *"]\n'
        f"\n[checker]\ncommand = {toml_value([PY, '-B', '-c', CHECK])}\n"
        "\n[budget]\nmax_iterations = 1\n",
    )
    commit_all(repo, "a site with a red link, and a schema")


# The tools each CLI's stream shows for the read, the edit and the shell command.
TOOLS = {"claude": {"Read", "Edit", "Bash"}, "opencode": {"read", "edit", "bash"}}


@pytest.mark.parametrize("name", ["claude", "opencode"])
@pytest.mark.parametrize(
    ("script", "named", "on_disk"),
    [
        (
            "css_then_schema_by_bash",
            [("path", "db/schema.sql"), ("command", f"{APPEND} >> db/schema.sql")],
            True,
        ),
        (
            "css_then_write_and_delete",
            [("path", "db/scratch.sql"), ("command", "rm db/scratch.sql")],
            False,
        ),
    ],
)
def test_the_real_cli_straying_out_of_scope_is_paused_from_its_stream(
    repo: Path, name: str, script: str, named: list[tuple[str, str]], on_disk: bool
) -> None:
    """Claude Code's stream-json and opencode's `run --format json`: the tools each called, the
    commands its shell tool ran and the files its write and edit tools named."""
    box = make_sandbox()
    css_site(repo, name, box)
    env = cli_environment(name, box)

    run = run_sealed(repo, box, env, "run", "css", "--once", script=script)

    assert run.posts(), run.done.stderr
    (footprint,) = events(repo, "attempt_footprint")
    measured = footprint.data["footprint"]
    assert measured["stream"] is True, run.done.stdout[-3000:]  # read from the CLI's own stream
    assert TOOLS[name] <= set(measured["tools"]), measured
    found = {(e["kind"], e["what"]) for e in footprint.data["outside"]}
    for step in named:
        assert step in found, (found, run.done.stdout[-3000:])
    # The work was really done: the fix (and the stray) are in the worktree's snapshot…
    assert ("db/schema.sql" in measured["files"]) is on_disk
    assert "styles/site.css" in measured["files"]
    # …and held: the task waits, naming the path, with nothing committed.
    (finished,) = [e for e in events(repo, "task_finished") if e.loop == "css"]
    assert (finished.data["status"], finished.data["outcome"]) == ("paused", "needs-approval")
    assert named[0][1] in finished.data["reason"]
    assert events(repo, "commit_created") == []
    (task,) = {e.task for e in events(repo, "attempt_footprint")}
    assert git(repo, "rev-parse", f"loop/css/{task}") == git(repo, "rev-parse", "main")
    assert "ADD COLUMN theme" not in (repo / "db" / "schema.sql").read_text()


def test_the_real_codex_straying_out_of_scope_is_paused_from_its_stream(repo: Path) -> None:
    """Codex's `exec --json` stream: its shell commands (unwrapped from `bash -lc`) and the
    diff; the append to db/schema.sql is named as a path and as a command."""
    box = make_sandbox()
    css_site(repo, "codex", box)
    env = cli_environment("codex", box)

    run = run_sealed(repo, box, env, "run", "css", "--once", script="css_then_schema_by_bash")

    assert run.posts(), run.done.stderr
    (footprint,) = events(repo, "attempt_footprint")
    measured = footprint.data["footprint"]
    assert measured["stream"] is True, run.done.stdout[-3000:]
    assert "shell" in measured["tools"]
    found = {(e["kind"], e["what"]) for e in footprint.data["outside"]}
    assert ("path", "db/schema.sql") in found, (found, run.done.stdout[-3000:])
    assert ("command", f"{APPEND} >> db/schema.sql") in found, found
    (finished,) = [e for e in events(repo, "task_finished") if e.loop == "css"]
    assert (finished.data["status"], finished.data["outcome"]) == ("paused", "needs-approval")
    assert events(repo, "commit_created") == []
