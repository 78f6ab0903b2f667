"""`loopctl demo`: a loop end to end in a throwaway repository: a fix, its diff, a gated push
approved and landed on a remote of its own, nothing left behind with `--no-keep`."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from loopctl import git
from loopctl.backends import backend_for
from loopctl.commands.inbox import approve
from loopctl.commands.inbox_show import patch
from loopctl.commands.init import detect_agent_clis
from loopctl.definitions import load_project
from loopctl.engine.runner import Engine
from loopctl.errors import AgentUnavailable
from loopctl.journal.inbox import ItemKind, open_items
from loopctl.journal.recorder import Recorder
from loopctl.paths import TEMPLATES
from loopctl.text import strip_controls

if TYPE_CHECKING:
    from loopctl.definitions import Project
    from loopctl.journal.events import Event

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
# The demo's check is this small program rather than pytest, so that `loopctl demo` runs from a
# plain install of loopctl (pytest is a dev tool, not a dependency). It runs every `test_*`
# function of tests/test_*.py and prints pytest-style result lines.
RUN_TESTS = """\"\"\"Run every test_* function in tests/test_*.py; exit 1 unless all pass.\"\"\"

import importlib.util
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.dont_write_bytecode = True
passed = failed = 0
for path in sorted((ROOT / "tests").glob("test_*.py")):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, test in vars(module).items():
        if not (name.startswith("test") and callable(test)):
            continue
        try:
            test()
        except Exception:
            failed += 1
            print(f"FAILED tests/{path.name}::{name}")
            traceback.print_exc(limit=-1)
        else:
            passed += 1
print(f"{failed} failed, {passed} passed")
sys.exit(0 if passed and not failed else 1)
"""
DEMO_AGENT = """description = \"\"\"loopctl's bundled demo agent: a scripted program \\
(not a model) that swaps operators until the tests pass\"\"\"
backend = "command"
argv = [{python}, "-m", "loopctl.commands.demo_agent", {python}, "tests/run_tests.py"]
timeout = "2m"
"""
CONFIG = """version = 1

[defaults]
maker = "{maker}"

[conditions]
"tests green" = [{python}, "tests/run_tests.py"]

# Beside the demo repository, so that removing the demo's folder removes its worktree too.
[worktree]
root = {worktrees}
"""
# The loop the demo ticks once: the goal, then a push that waits for a human (push is gated
# unless a loop lists its own `approve`).
LOOP = """description = "Fix the failing test, then push the fix once a human approved it"
goal = "tests green"
prompt = "Make the failing test pass. Fix the code, not the tests."

[deliver]
actions = ["commit", "push"]
"""


def _git(cwd: Path, *args: str) -> str:
    # The user's global config may sign commits or name hooks: git/runner.py's hardening turns
    # both off; the identity is the demo's own, not the user's.
    identity = ("-c", "user.name=loopctl demo", "-c", "user.email=demo@localhost")
    return git.git([*identity, *args], cwd=cwd).stdout


def make_demo_repo(parent: Path, maker_cli: str | None) -> Path:
    """A small project whose `add` is wrong, with loopctl set up to fix it."""
    root = parent / "calc-demo"
    (root / "tests").mkdir(parents=True)
    (root / "agents").mkdir()
    (root / ".loop").mkdir()
    (root / "calc.py").write_text(CALC)
    (root / "tests" / "test_calc.py").write_text(TEST)
    (root / "tests" / "run_tests.py").write_text(RUN_TESTS)
    # For a user (or agent) who has pytest: it finds calc.py the same way.
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (root / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    python = _toml_string(sys.executable)
    (root / "agents" / "demo-fixer.toml").write_text(DEMO_AGENT.format(python=python))
    maker = "demo-fixer"
    if maker_cli is not None:
        maker = f"{maker_cli}-maker"
        shutil.copy(TEMPLATES / "agents" / f"{maker}.toml", root / "agents" / f"{maker}.toml")
    worktrees = _toml_string(str(parent / "worktrees"))
    (root / ".loop" / "config.toml").write_text(
        CONFIG.format(maker=maker, python=python, worktrees=worktrees)
    )
    (root / ".loop" / "loops").mkdir()
    (root / ".loop" / "loops" / "fix.toml").write_text(LOOP)
    # STATE.md and INBOX.md are rebuilt from the log: not part of the project.
    (root / ".loop" / ".gitignore").write_text("log/\nlocks/\nruns/\ncache/\nSTATE.md\nINBOX.md\n")
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "calc with a bug in add()")
    # A remote of its own, inside the demo's folder, for the gated push to land in.
    origin = parent / "origin.git"
    _git(parent, "init", "-q", "--bare", "-b", "main", str(origin))
    _git(root, "remote", "add", "origin", str(origin))
    _git(root, "push", "-q", "origin", "main")
    return root


def run_demo(
    *, keep: bool, say: Callable[[str], None], observer: Callable[[Event], None] | None = None
) -> int:
    """Run the demo in a new temporary folder; remove it afterwards unless `keep`.

    `say` prints the walk-through; `observer` sees each event of the goal run as it is written.
    """
    loopctl = _loopctl_command()
    parent = Path(tempfile.mkdtemp(prefix="loopctl-demo-"))
    try:
        outcome_ok = _run_demo(parent, loopctl, keep=keep, say=say, observer=observer)
    finally:
        if not keep:
            shutil.rmtree(parent, ignore_errors=True)
    return 0 if outcome_ok else 1


def _run_demo(
    parent: Path,
    loopctl: str,
    *,
    keep: bool,
    say: Callable[[str], None],
    observer: Callable[[Event], None] | None,
) -> bool:

    detected = detect_agent_clis()
    root = make_demo_repo(parent, detected[0] if detected else None)
    project = load_project(root)
    maker = project.config.maker or "demo-fixer"
    try:
        backend_for(project.agent(maker))
    except AgentUnavailable:
        say(f"{detected[0]} is on PATH, but this loopctl cannot drive it yet; using the demo agent")
        maker = "demo-fixer"
        (root / ".loop" / "config.toml").write_text(
            CONFIG.format(
                maker=maker,
                python=_toml_string(sys.executable),
                worktrees=_toml_string(str(parent / "worktrees")),
            )
        )
        _git(root, "commit", "-q", "-a", "-m", "the demo agent does the work")
        project = load_project(root)
    say(f"demo repository: {root}")
    say("calc.py has a bug: add() subtracts. Its tests (tests/run_tests.py) fail.")
    agent = project.agent(maker)
    say(f"maker: {agent.name} — {agent.description}")
    say('loop .loop/loops/fix.toml: goal "tests green", then push, which waits for a human\n')
    say("$ loopctl run fix --once")
    outcome = Engine(Recorder(project, observer=observer)).run_loop_once(project.loop("fix"))
    say("")
    for task in outcome.tasks:
        say(f"task {task.task}: {task.status} after {task.attempts} attempt(s)")
    return _review_and_approve(project, root, loopctl, keep=keep, parent=parent, say=say)


def _review_and_approve(
    project: Project,
    root: Path,
    loopctl: str,
    *,
    keep: bool,
    parent: Path,
    say: Callable[[str], None],
) -> bool:
    """Show the fix as a person reviews it (the approval's diff), approve it, show it landed."""

    waiting = [
        item for item in open_items(Recorder(project).log.read()) if item.kind == ItemKind.APPROVAL
    ]
    if not waiting:
        say("no approval is waiting: the fix did not pass its checks")
        return False
    item = waiting[0]
    say(f"needs you: {item.summary}")
    say(f"\n$ loopctl inbox diff {item.id}")
    say(strip_controls(patch(project, item.id).decode("utf-8", "replace")).rstrip())
    say(f'\n$ loopctl inbox approve {item.id} --note "reviewed the diff"')
    result = approve(project, item.id, note="reviewed the diff")
    say(result.message)
    branch = str(item.evidence.get("branch") or "")
    landed = _git(root, "ls-remote", "origin", f"refs/heads/{branch}").split()
    if landed:
        say(f"\norigin now has {branch} at {landed[0][:12]}: the approved commit, pushed once")
    if keep:
        say(f"\nexplore it: cd {shlex.quote(str(root))} && {loopctl} status && {loopctl} log")
        say(f"remove it:  rm -rf {shlex.quote(str(parent))}")
    else:
        say("\nnothing is left behind: the demo's folder, worktree and remote are removed")
    return result.ok and bool(landed)


def _loopctl_command() -> str:
    """How to run this same loopctl from any folder, as a shell command.

    The demo's hint must work as printed, also when loopctl's venv is not activated: the
    absolute path of the `loopctl` script that is running, else this interpreter with `-m`.
    """
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if (
        script is not None
        and script.name == "loopctl"
        and script.is_file()
        and os.access(script, os.X_OK)
    ):
        return shlex.quote(str(script.absolute()))
    return f"{shlex.quote(sys.executable)} -m loopctl"


def _toml_string(text: str) -> str:
    # With ensure_ascii=False, JSON escapes only quotes, backslashes and control characters,
    # in forms TOML's basic strings share.
    return json.dumps(text, ensure_ascii=False)
