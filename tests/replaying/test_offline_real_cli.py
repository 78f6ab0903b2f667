"""The real Claude Code, recorded through loopctl's egress proxy, replays offline (issue 31, 5).

Judged on the wire: a run of a loop whose maker is the installed Claude Code (skipped when it
is absent, a failure under LOOPCTL_REQUIRE_REAL_CLIS=1) against the scripted model server, in
a loopback-only network namespace where possible (tests/support/real_clis.py). The server then
stops; `loopctl replay RUN --offline` runs in a network namespace of its own with nothing in it
(as root), so no model and no network: the same STATE.md, every request matched. One byte
changed in the loop's prompt names the first divergent request.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.cli import loopctl_argv
from support.journal import events
from support.real_clis import (
    cli_environment,
    make_sandbox,
    netns_available,
    run_sealed,
    use_real_maker,
)
from support.repos import commit_all, make_project, write_loop

LOOPBACK_UP = (
    "import os, subprocess, sys; subprocess.run(['ip', 'link', 'set', 'lo', 'up'], check=True);"
    " os.execvp(sys.argv[1], sys.argv[1:])"
)
PROMPT = "Fix add() in calc.py so that the tests pass."
LOOP = f'prompt = "{PROMPT}"\ngoal = "tests green"\n\n[budget]\nmax_iterations = 1\n'


def replay(repo: Path, env: dict[str, str], run: str) -> tuple[int, dict[str, Any], str]:
    """`loopctl replay RUN --offline --json` with no network at all (as root)."""
    argv = loopctl_argv("replay", run, "--offline", "--json")
    if netns_available():
        # A namespace of its own with loopback up, and nothing else: the replay's model server
        # and loopctl's proxy meet on 127.0.0.1; no other host exists.
        argv = ["unshare", "-n", "--", sys.executable, "-c", LOOPBACK_UP, *argv]
    done = subprocess.run(
        argv,
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=600,
    )
    payload = json.loads(done.stdout)["replay"] if done.stdout.strip() else {}
    return done.returncode, payload, done.stdout + done.stderr


@pytest.mark.parametrize("name", ["claude", "codex"])
def test_a_real_cli_run_replays_offline_and_a_changed_prompt_byte_diverges(
    repo: Path, name: str
) -> None:
    box = make_sandbox()
    env = cli_environment(name, box)
    make_project(repo)
    use_real_maker(repo, name, box)
    write_loop(repo, "fix", LOOP)
    commit_all(repo, f"the real {name} as maker of the loop fix")

    recorded = run_sealed(repo, box, env, "run", "fix", "--once")

    shown = recorded.done.stdout + recorded.done.stderr
    assert recorded.done.returncode == 0, shown
    asked = [p for p in recorded.posts() if isinstance(p["body"], dict)]
    assert asked, shown
    (started,) = events(repo, "tick_started")
    run = started.run or ""
    (cassette,) = (repo / ".loop" / "runs" / run).glob("*/attempt-1/maker.cassette.jsonl")
    exchanges = cassette.read_text().splitlines()[1:]
    # Every model request the server saw is in the cassette; the key never is.
    assert len(exchanges) == len(recorded.posts())
    assert "sk-loopctl-test" not in cassette.read_text()

    code, payload, output = replay(repo, env, run)

    assert code == 0, output
    assert payload["diverged"] is None, output
    assert payload["state_identical"], output
    assert payload["recorded_outcomes"] == payload["replayed_outcomes"] == {"main": "done"}

    (repo / ".loop" / "loops" / "fix.toml").write_text(LOOP.replace("calc.py so", "calc.py sO"))
    code, payload, output = replay(repo, env, run)

    assert code == 1, output
    assert payload["state_identical"] is False  # strict: the diverged turn got no answer
    diverged = payload["diverged"]
    assert diverged["attempt"] == "main/attempt-1/maker", output
    assert "calc.py so" in diverged["detail"], output
    assert "calc.py sO" in diverged["detail"], output
