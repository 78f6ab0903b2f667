"""`loopctl demo`: a goal loop end to end in a throwaway repository with a failing test."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

CALC = """def add(a, b):
    return a - b


def mul(a, b):
    return a * b
"""
TEST = """from calc import add, mul


def test_add():
    assert add(2, 3) == 5


def test_mul():
    assert mul(2, 3) == 6
"""
DEMO_AGENT = """description = \"\"\"loopctl's bundled demo agent: a scripted program \\
(not a model) that swaps operators until the tests pass\"\"\"
backend = "command"
argv = [
    {python}, "-m", "loopctl.demo_agent",
    {python}, "-m", "pytest", "-q", "-p", "no:cacheprovider",
]
timeout = "2m"
"""
CONFIG = """version = 1

[defaults]
maker = "{maker}"

[conditions]
"tests green" = [{python}, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
"""


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=loopctl demo", "-c", "user.email=demo@localhost", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout


def make_demo_repo(parent: Path, maker_cli: str | None) -> Path:
    """A small project whose `add` is wrong, with loopctl set up to fix it."""
    root = parent / "calc-demo"
    (root / "tests").mkdir(parents=True)
    (root / "agents").mkdir()
    (root / ".loop").mkdir()
    (root / "calc.py").write_text(CALC)
    (root / "tests" / "test_calc.py").write_text(TEST)
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (root / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    python = f'"{sys.executable}"'
    (root / "agents" / "demo-fixer.toml").write_text(DEMO_AGENT.format(python=python))
    maker = "demo-fixer"
    if maker_cli is not None:
        from loopctl.scaffold import TEMPLATES

        maker = f"{maker_cli}-maker"
        shutil.copy(TEMPLATES / "agents" / f"{maker}.toml", root / "agents" / f"{maker}.toml")
    (root / ".loop" / "config.toml").write_text(CONFIG.format(maker=maker, python=python))
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "calc with a bug in add()")
    return root


def run_demo(*, keep: bool, say: Callable[[str], None]) -> int:
    from loopctl.backends import backend_for
    from loopctl.definitions import load_project
    from loopctl.engine import Engine, GoalOptions
    from loopctl.errors import AgentUnavailable
    from loopctl.scaffold import detect_agent_clis

    parent = Path(tempfile.mkdtemp(prefix="loopctl-demo-"))
    detected = detect_agent_clis()
    root = make_demo_repo(parent, detected[0] if detected else None)
    project = load_project(root)
    maker = project.config.maker or "demo-fixer"
    try:
        backend_for(project.agent(maker))
    except AgentUnavailable:
        say(f"{detected[0]} is on PATH, but this loopctl cannot drive it yet; using the demo agent")
        maker = "demo-fixer"
    say(f"demo repository: {root}")
    say("calc.py has a bug: add() subtracts. `pytest` fails.")
    agent = project.agent(maker)
    say(f"maker: {agent.name} — {agent.description}")
    say('running: loopctl goal "tests green"\n')
    from loopctl.cli.live import RunView

    with RunView(live=False) as view:
        outcome = Engine(project, observer=view).run_goal(GoalOptions("tests green", agent=maker))
    say("")
    for task in outcome.tasks:
        say(f"task {task.task}: {task.status} after {task.attempts} attempt(s)")
        if task.commit:
            say(f"commit {task.commit[:12]} on branch {task.branch}:")
            say(_git(root, "show", "--stat", "--format=  %s", task.commit).rstrip())
    say("\n--- .loop/STATE.md ---")
    say((root / ".loop" / "STATE.md").read_text().split("## Notes")[0].rstrip())
    say("\n--- loopctl inbox ---")
    say((root / ".loop" / "INBOX.md").read_text().rstrip())
    if keep:
        say(f"\nexplore it: cd {root} && loopctl status && loopctl log")
    else:
        shutil.rmtree(parent, ignore_errors=True)
    return 0 if outcome.ok else 1
