"""`loopctl inbox --sort risk` (issue 30, item 6): a big change to a protected path comes first.

Real commits in a real repository, a log as the engine writes it, the real CLI in a child
process. The default order (oldest first) and the default `--json` stay as they were.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.cli import assert_clean_exit, run_loopctl
from support.repos import commit_all, git, make_project, write_loop

from loopctl.journal.events import EventLog
from loopctl.paths import ProjectPaths


def _commit_on(repo: Path, branch: str, files: dict[str, str]) -> tuple[str, str]:
    """A commit on a new `branch` from main with `files` written; (base, commit)."""
    base = git(repo, "rev-parse", "main").strip()
    git(repo, "checkout", "-q", "-b", branch, base)
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    commit_all(repo, f"work on {branch}")
    commit = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "main")
    return base, commit


def _task(log: EventLog, run: str, task: str, base: str, commit: str, *, claims: Any = None) -> str:
    """The events of a gated task that waits for its approval; the item's id."""
    log.append("tick_started", run=run, loop="ship", data={"kind": "tick"})
    log.append("task_found", run=run, loop="ship", task=task, data={"prompt": f"do {task}"})
    created = {"path": f"/wt/{task}", "branch": f"loop/ship/{task}", "base_sha": base}
    log.append("worktree_created", run=run, loop="ship", task=task, data=created)
    log.append("attempt_started", run=run, loop="ship", task=task, data={"attempt": 1})
    finished: dict[str, Any] = {"attempt": 1, "verdict": "passed", "reason": "ok"}
    if claims is not None:
        finished["claims"] = claims
    log.append("attempt_finished", run=run, loop="ship", task=task, data=finished)
    log.append("commit_created", run=run, loop="ship", task=task, data={"sha": commit})
    item = f"i{task}"
    opened = {
        "id": item,
        "kind": "approval",
        "summary": f"{task}: push loop/ship/{task}",
        "evidence": {"commit": commit, "branch": f"loop/ship/{task}"},
    }
    log.append("inbox_opened", run=run, loop="ship", task=task, data=opened)
    return item


def test_inbox_sorted_by_risk_puts_a_big_change_to_a_protected_path_first(repo: Path) -> None:
    make_project(repo, "fixer.py")
    write_loop(
        repo,
        "ship",
        'goal = "tests green"\nprompt = "fix it"\n\n[checker]\nprotect = ["tests/**"]\n\n'
        '[deliver]\nactions = ["commit", "push"]\napprove = ["push"]\n',
    )
    commit_all(repo, "the ship loop")
    calc = (repo / "calc.py").read_text()
    small = _commit_on(repo, "loop/ship/small", {"calc.py": calc.replace("-", "+", 1)})
    weaker = _commit_on(repo, "loop/ship/weaker", {"calc.py": calc + "\n# tidy\n"})
    big = _commit_on(
        repo,
        "loop/ship/big",
        {
            "tests/test_calc.py": "def test_nothing():\n    pass\n",
            "helpers.py": "".join(f"X{n} = {n}\n" for n in range(300)),
        },
    )
    log = EventLog(ProjectPaths(repo).events_file)
    fewer = {
        "said": "tidied",
        "measured": {
            "files": ["calc.py"],
            "added": 1,
            "removed": 0,
            "tests": {"passed": 2, "failed": 0},
            "base": {"passed": 5, "failed": 0},
        },
    }
    ids = [
        _task(log, "r1", "small", *small),
        _task(log, "r2", "weaker", *weaker, claims=fewer),
        _task(log, "r3", "big", *big),
    ]

    by_age = run_loopctl(repo, "inbox", "--json")
    by_risk = run_loopctl(repo, "inbox", "--sort", "risk", "--json")
    table = run_loopctl(repo, "inbox", "--sort", "risk")
    wrong = run_loopctl(repo, "inbox", "--sort", "size")

    assert_clean_exit(by_age, 0)
    listed = json.loads(by_age.stdout)["inbox"]
    assert [i["id"] for i in listed] == ids  # the default order and shape are unchanged
    assert all("risk" not in i for i in listed)
    assert_clean_exit(by_risk, 0)
    ranked = json.loads(by_risk.stdout)["inbox"]
    assert [i["id"] for i in ranked] == ["ibig", "iweaker", "ismall"]
    first, second, third = (i["risk"] for i in ranked)
    assert first["protected"] == ["tests/test_calc.py"]
    assert first["files"] == 2
    assert first["lines"] >= 300
    assert first["sensitive"] == []
    assert second["weaker_checks"] == {"tests": 2, "base": 5}
    assert (second["lines"], second["files"]) == (1, 1)
    assert third["protected"] == []
    assert third["weaker_checks"] is None
    assert third["lines"] == 2
    assert first["score"] > second["score"] > third["score"]
    assert first["checker_confidence"] is None
    assert_clean_exit(table, 0)
    rows = [line.split()[0] for line in table.stdout.splitlines()[1:] if line.strip()]
    assert rows[:3] == ["ibig", "iweaker", "ismall"]
    assert "protected: tests/test_calc.py" in table.stdout
    assert wrong.returncode == 2, wrong.stdout + wrong.stderr
    assert "--sort must be age or risk, not 'size'" in wrong.stderr
