"""loopctl never follows a link an agent planted (issue 24, item 2; DESIGN §5 invariant 11).

loopctl runs unconfined, here as root. After a maker's turn it cleans the object overlay,
recycles the worktree through the pool (opening up and deleting what the maker left), removes
preserved folders, and `worktrees prune` deletes pooled worktrees. The hostile maker
(agents/plants_links.py) plants links to a victim folder at each of those places, in two tasks
so that the second recycles the first's worktree; afterwards the victim's names, modes and bytes
are exactly as before. The canary: the same planted layout, handled with the path-based
operations loopctl used before (`os.walk` and `chmod` by path, `shutil.rmtree` of a path with a
link on the way), does change the victim.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from support.accounts import as_user, give_to, unprivileged_python
from support.journal import events
from support.repos import git

from loopctl import nofollow, sandbox
from loopctl.seeds import remove_preserved

PY = sys.executable
AGENT = Path(__file__).parents[1] / "agents" / "plants_links.py"

pytestmark = pytest.mark.skipif(
    sandbox.probe()[0] != "bwrap", reason=f"no bwrap sandbox here: {sandbox.probe()[2]}"
)


def make_victim(base: Path) -> Path:
    """A folder outside every place the agent may write, with files and folders of known modes
    (what a chmod, an rmdir or a delete through a link would change)."""
    victim = base / "victim"
    (victim / "sub").mkdir(parents=True)
    (victim / "work" / "inner").mkdir(parents=True)
    (victim / "cache").mkdir()
    (victim / "file.txt").write_text("the victim's own bytes\n")
    (victim / "cache" / "kept.txt").write_text("cached\n")
    for path, mode in (
        (victim / "file.txt", 0o640),
        (victim / "cache" / "kept.txt", 0o444),
        (victim / "cache", 0o555),
        (victim / "sub", 0o750),
        (victim / "work" / "inner", 0o751),
        (victim / "work", 0o750),
    ):
        path.chmod(mode)
    return victim


def shape(folder: Path) -> dict[str, tuple[int, bytes]]:
    """Every entry under `folder`: its mode and, for a file, its bytes."""
    found = {}
    for dirpath, dirs, files in os.walk(folder):
        for name in [*dirs, *files]:
            path = Path(dirpath) / name
            info = path.lstat()
            data = path.read_bytes() if stat.S_ISREG(info.st_mode) else b""
            found[str(path.relative_to(folder))] = (stat.S_IMODE(info.st_mode), data)
    found["."] = (stat.S_IMODE(folder.lstat().st_mode), b"")
    return found


def make_project(base: Path, victim: Path, python: str = PY) -> Path:
    home = base / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = t\n\temail = t@t\n")
    root = base / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    (root / ".gitignore").write_text("__pycache__/\ndeps\nnode_modules\nlocked\n*.moved\n")
    (root / "agents").mkdir()
    argv = [python, str(AGENT), str(victim)]
    (root / "agents" / "maker.toml").write_text(
        f'backend = "command"\nargv = {json.dumps(argv)}\ntimeout = "120s"\n'
    )
    (root / ".loop" / "loops").mkdir(parents=True)
    config = '[defaults]\nmaker = "maker"\n'
    if python != PY:
        config += '\n[env]\nallow = ["PYTHONPATH"]\n'  # the system Python finds loopctl so
    (root / ".loop" / "config.toml").write_text(config)
    check = [python, "-B", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
    tasks = json.dumps([{"id": "t1"}, {"id": "t2"}])
    setup = [python, "-c", "import os; os.makedirs('deps/cache', exist_ok=True)"]
    (root / ".loop" / "loops" / "links.toml").write_text(
        f"[tasks]\ncommand = {json.dumps([python, '-c', f'print({tasks!r})'])}\n"
        'prompt = "fix {id}"\n\n[maker]\nagent = "maker"\n\n'
        f"[checker]\ncommand = {json.dumps(check)}\n\n"
        "[budget]\nmax_iterations = 1\nmax_parallel = 1\n\n"
        f'[worktree]\nsetup = [{json.dumps(setup)}]\npreserve = ["deps/cache"]\n'
    )
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "project")
    return root


def loopctl(
    root: Path, *args: str, runtime: tuple[str, str | None, str | None] = (PY, None, None)
) -> subprocess.CompletedProcess[str]:
    python, pythonpath, user = runtime
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root.parent / "home"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "LANG": "C.UTF-8",
        **({"PYTHONPATH": pythonpath} if pythonpath else {}),
    }
    return subprocess.run(
        [python, "-m", "loopctl", *args], cwd=root, env=env, capture_output=True, text=True,
        timeout=600, check=False, stdin=subprocess.DEVNULL, **as_user(user),
    )  # fmt: skip


def run_and_prune(
    root: Path, runtime: tuple[str, str | None, str | None] = (PY, None, None)
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    done = loopctl(root, "run", "links", "--once", runtime=runtime)
    # A loop that no longer pools: `worktrees prune` deletes its parked worktree.
    with (root / ".loop" / "loops" / "links.toml").open("a") as loop_file:
        loop_file.write("pool = false\n")
    return done, loopctl(root, "worktrees", "prune", runtime=runtime)


def test_links_planted_everywhere_loopctl_cleans_leave_the_victim_as_it_was(
    tmp_path: Path,
) -> None:
    victim = make_victim(tmp_path)
    before = shape(victim)
    root = make_project(tmp_path, victim)

    done, pruned = run_and_prune(root)

    outs = sorted((root / ".loop" / "runs").glob("*/*/attempt-*/maker.out"))
    output = "\n".join(out.read_text() for out in outs)
    assert len(outs) == 2, done.stdout + done.stderr
    # The attack was live: links in the state folder, the worktree and its admin folder...
    for where in ("state", "worktree", "admin"):
        assert f"LINKS {where} planted" in output, output
    # ...and the overlay's layers, beside the state folder, were out of the agent's reach.
    assert "LINKS layer planted" not in output, output
    assert "LINKS layer refused" in output, output
    for state in (root / ".loop" / "runs").glob("*/*/attempt-*/maker-state"):
        assert (state / "git-objects").is_symlink()  # left alone, not followed
    assert done.returncode == 0, done.stdout + done.stderr
    # t2 recycled t1's worktree (links, a locked folder and all), and prune deleted it after.
    notes = events(root, "note")
    ready = {e.task: e.data for e in notes if e.data.get("what") == "workspace_ready"}
    assert ready["t2"]["pool"] == "hit", ready
    assert pruned.returncode == 0, pruned.stdout + pruned.stderr
    assert "pooled" in pruned.stdout, pruned.stdout
    assert not list(tmp_path.glob("home/**/.pool/links/idle/*"))
    assert shape(victim) == before


def test_as_an_unprivileged_user_the_victim_stays_as_it_was() -> None:
    """The same attack with loopctl run by `nobody`; the victim belongs to that account too,
    so only not following the links keeps it (its modes are the account's to change)."""
    runtime = unprivileged_python()
    if runtime is None:
        pytest.skip("needs root and an interpreter the account `nobody` can run")
    python, pythonpath = runtime
    base = Path(tempfile.mkdtemp(prefix="loopctl-links-"))
    try:
        base.chmod(0o755)
        victim = make_victim(base)
        root = make_project(base, victim, python=python)
        give_to("nobody", base)
        before = shape(victim)
        done, pruned = run_and_prune(root, (python, pythonpath, "nobody"))
        output = "\n".join(
            out.read_text() for out in (root / ".loop" / "runs").glob("*/*/attempt-*/maker.out")
        )
        assert "LINKS worktree planted" in output, done.stdout + done.stderr
        assert "LINKS layer refused" in output, output
        assert done.returncode == 0, done.stdout + done.stderr
        assert pruned.returncode == 0, pruned.stdout + pruned.stderr
        assert "pooled" in pruned.stdout, pruned.stdout
        assert shape(victim) == before
    finally:
        shutil.rmtree(base, ignore_errors=True)


def plant_layout(worktree: Path, victim: Path) -> None:
    """What plants_links.py leaves in a worktree, made by hand for the canary."""
    worktree.mkdir()
    (worktree / "deps").symlink_to(victim)
    (worktree / "locked" / "inner").mkdir(parents=True)
    (worktree / "locked" / "out").symlink_to(victim)


def test_canary_path_based_cleanup_of_the_same_layout_changes_the_victim(tmp_path: Path) -> None:
    victim = make_victim(tmp_path)
    before = shape(victim)
    worktree = tmp_path / "wt"
    plant_layout(worktree, victim)
    # The old removal of a preserved folder: `deps` is followed on the way to `deps/cache`.
    target = worktree / "deps" / "cache"
    for folder, dirs, _files in os.walk(target):
        for name in dirs:
            os.chmod(os.path.join(folder, name), 0o700)
    os.chmod(target, 0o700)
    shutil.rmtree(target)
    # The old overlay cleanup: a link in place of the layer's work folder.
    state = tmp_path / "state"
    state.mkdir()
    (state / "git-objects").symlink_to(victim)
    work = state / "git-objects" / "work"
    for folder in sorted([work, *work.glob("*")], reverse=True):
        with contextlib.suppress(OSError):
            folder.chmod(0o700)
            folder.rmdir()
    assert shape(victim) != before


def test_the_same_layout_through_loopctls_operations_leaves_the_victim(tmp_path: Path) -> None:
    victim = make_victim(tmp_path)
    before = shape(victim)
    worktree = tmp_path / "wt"
    plant_layout(worktree, victim)
    (worktree / "locked").chmod(0)
    remove_preserved(worktree, "deps/cache")  # a link on the way: nothing is removed
    nofollow.open_up(worktree)
    state = tmp_path / "state"
    state.mkdir()
    (state / "git-objects").symlink_to(victim)
    box = sandbox.Sandbox("bwrap", "bwrap", tmp_path, worktree, objects_layer=state / "git-objects")
    box.discard_scratch()
    nofollow.remove_tree(worktree)
    assert shape(victim) == before
    assert not worktree.exists()
    assert (state / "git-objects").is_symlink()
