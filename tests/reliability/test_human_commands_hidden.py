"""Humans' commands stay human when the agent hides its tie to them (issue 27, item 1).

With the sandbox off, an agent's descendant can shed every mark it can reach: the
LOOPCTL_ROLE variable (its own environment) and the agent as its parent (a double fork). What
it cannot shed is the environment an ancestor further up was started with, and the process
group and session it keeps from the agent. Each test here leaves exactly one of those, and the
human's command still refuses. Each names the mutant of loopctl/commands/agent_context.py it
kills.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from support.cli import assert_clean_exit, run_loopctl
from support.delivery import action, ledger_entries
from support.journal import events
from support.repos import FAST_CHECK, PY, make_project, toml_value, write_config, write_loop

ORPHANS = Path(__file__).parent / "agents" / "orphans_human_command.py"
REFUSAL = "is a human's command and refuses to run inside an agent's environment"


def pending_approval(repo: Path, ledger: Path) -> str:
    """The calc project (sandbox off) whose delivery, a custom action writing to `ledger`,
    waits for a human; returns the approval's id."""
    make_project(repo, "fixer.py")
    # A PYTHONPATH of the test's (a copy of loopctl) reaches the loopctl an agent starts too.
    allow = '\n[env]\nallow = ["PYTHONPATH"]\n' if os.environ.get("PYTHONPATH") else ""
    write_config(
        repo,
        'version = 1\n\n[defaults]\nmaker = "maker"\n\n[conditions]\n'
        f'"tests green" = {toml_value(FAST_CHECK)}\n\n[sandbox]\nmode = "off"\n' + allow,
    )
    write_loop(
        repo,
        "ship",
        'goal = "tests green"\nprompt = "fix add"\n\n[deliver]\n'
        f'actions = ["commit", {action(ledger, "deploy")}]\n',
    )
    assert_clean_exit(run_loopctl(repo, "run", "ship", "--once"), 0)
    (opened,) = events(repo, "inbox_opened")
    return str(opened.data["id"])


def test_a_double_forked_unmarked_grandchild_of_an_agent_cannot_approve(
    repo: Path, tmp_path: Path
) -> None:
    """Kills matching only the process itself and its ancestors against the running agents
    (the group and session leader dropped): the orphan's parent is no agent and its
    environment has no mark; its group and session are the agent's."""
    ledger, record = tmp_path / "ledger.jsonl", tmp_path / "tries.jsonl"
    item = pending_approval(repo, ledger)
    argv = [PY, str(ORPHANS), str(record), str(repo), "inbox", "approve", item]
    (repo / "agents" / "orphans.toml").write_text(
        f'backend = "command"\nargv = {toml_value(argv)}\ntimeout = "60s"\n'
    )
    done = run_loopctl(repo, "goal", "tests green", "--agent", "orphans", "--max-iterations", "1")
    assert_clean_exit(done, 1)  # the goal is not met: this maker fixed nothing

    (tried,) = [json.loads(line) for line in record.read_text().splitlines()]
    assert tried["orphaned"] is True, tried  # the agent was no longer its ancestor
    assert tried["parent"] != tried["agent"], tried
    assert tried["code"] == 1, tried
    assert REFUSAL in tried["stderr"], tried
    assert events(repo, "approved") == []
    assert ledger_entries(ledger) == []


# A marked process (an agent of another project, whose log this project never saw) starts an
# unmarked shell-like child, which starts loopctl: the mark is on the grandparent only.
MIDDLE = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"
MARKED = f"""
import os, subprocess, sys
unmarked = {{k: v for k, v in os.environ.items() if k != "LOOPCTL_ROLE"}}
middle = [sys.executable, "-c", {MIDDLE!r}, sys.executable, "-m", "loopctl", *sys.argv[1:]]
sys.exit(subprocess.run(middle, env=unmarked).returncode)
"""


def test_a_mark_on_a_grandparent_is_found_not_only_on_the_parent(
    repo: Path, tmp_path: Path
) -> None:
    """Kills looking at the parent's environment only: the agent that carries LOOPCTL_ROLE is
    the grandparent, and this project's log knows no running agent to match instead."""
    ledger = tmp_path / "ledger.jsonl"
    item = pending_approval(repo, ledger)
    env = {**os.environ, "LOOPCTL_ROLE": "maker"}
    done = subprocess.run(
        [PY, "-c", MARKED, "inbox", "approve", item], cwd=repo, env=env, capture_output=True,
        text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert REFUSAL in done.stderr
    assert "its ancestor process" in done.stderr
    assert events(repo, "approved") == []
    assert ledger_entries(ledger) == []
    # The refusal was the guard's doing: the same command from a human's shell works.
    assert_clean_exit(run_loopctl(repo, "inbox", "approve", item), 0)
    assert [entry["name"] for entry in ledger_entries(ledger)] == ["deploy"]
