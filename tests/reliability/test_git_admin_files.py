"""Git admin files cannot steer loopctl (issue 24, item 4; DESIGN §5 invariants 8, 11 and 12).

The repository has `extensions.worktreeConfig` on (as `git sparse-checkout` leaves it), so git
reads a linked worktree's `config.worktree` from its admin folder. The main checkout holds an
uncommitted, unchecked edit that breaks calc.add and an untracked notes.txt with an API key. The
hostile maker (agents/plants_worktree_config.py) sets `core.worktree` there to the main checkout,
with `core.hooksPath` and `core.fsmonitor` naming programs of its own, then fixes calc.add in its
worktree. Were loopctl's snapshot to follow, the task branch would carry the main checkout's
broken code and the key.

Sandboxed (the default), as root and as an unprivileged user, each write is refused: the file
is pinned read-only before the agent starts, though a fresh worktree has none. Unconfined
(`mode = "off"`), the plant lands and loopctl's own git ignores it: it names the working tree
itself. The canary runs plain git on the same planted files and sees the redirect. And when git
in the worktree would work on another tree all the same (the agent deleted its `.git` file, and
the worktree lies under a home kept in git), loopctl refuses the snapshot, stops the task and
says why in the inbox.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from support.accounts import as_user, give_to, unprivileged_python
from support.repos import git

from loopctl import sandbox

PY = sys.executable
AGENT = Path(__file__).parents[1] / "agents" / "plants_worktree_config.py"
FIXED = "def add(a, b):\n    return a + b\n"
BROKEN = "def add(a, b):\n    return a * b  # the user's unchecked edit\n"
NOTES = "ANTHROPIC_API_KEY=sk-ant-fake-key-0451\n"
HOOKS_AND_FSMONITOR = ("fsmonitor", "hook:")

needs_bwrap = pytest.mark.skipif(
    sandbox.probe()[0] != "bwrap", reason=f"no bwrap sandbox here: {sandbox.probe()[2]}"
)


def make_project(
    base: Path, *agent_args: str, mode: str | None = None, home_repo: bool = False, python: str = PY
) -> Path:
    """The calc project with worktree config on, the hostile maker, and a main checkout holding
    the user's broken edit and notes; `home_repo` keeps the home (where worktrees live by
    default) in git, as dotfiles often are."""
    home = base / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = t\n\temail = t@t\n")
    if home_repo:
        git(home, "init", "-q", "-b", "dotfiles")
        git(home, "add", ".gitconfig")
        git(home, "commit", "-q", "-m", "dotfiles")
        (home / "notes.txt").write_text(NOTES)
    root = base / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "extensions.worktreeConfig", "true")
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    (root / ".gitignore").write_text("__pycache__/\n.tools/\n")
    (root / "agents").mkdir()
    argv = [python, str(AGENT), str(base / "marker"), *agent_args]
    (root / "agents" / "maker.toml").write_text(
        f'backend = "command"\nargv = {json.dumps(argv)}\ntimeout = "120s"\n'
    )
    (root / ".loop" / "loops").mkdir(parents=True)
    config = '[defaults]\nmaker = "maker"\n'
    if python != PY:
        config += '\n[env]\nallow = ["PYTHONPATH"]\n'  # the system Python finds loopctl so
    if mode is not None:
        config += f'\n[sandbox]\nmode = "{mode}"\n'
    config += '\n[worktree]\nkeep = "always"\n'
    (root / ".loop" / "config.toml").write_text(config)
    check = [python, "-B", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
    (root / ".loop" / "loops" / "attack.toml").write_text(
        'prompt = "Fix add()."\n\n[maker]\nagent = "maker"\n\n'
        f"[checker]\ncommand = {json.dumps(check)}\n\n"
        '[budget]\nmax_iterations = 1\n\n[deliver]\nactions = ["commit"]\n'
    )
    # `.loop/` is committed, its projections kept local: what loopctl writes there during the
    # run never shows in a snapshot, so only the defences under test stand in the attack's way.
    (root / ".loop" / ".gitignore").write_text("log/\nlocks/\nruns/\ncache/\nSTATE.md\nINBOX.md\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "project")
    # The user's work in progress: never checked, never to be committed by a loop.
    (root / "calc.py").write_text(BROKEN)
    (root / "notes.txt").write_text(NOTES)
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


def plain_git(cwd: Path, index: Path, *args: str) -> str:
    """git as a user runs it (no hardening), staging into `index`, not the worktree's own."""
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def maker_output(root: Path) -> str:
    outs = sorted((root / ".loop" / "runs").glob("*/*/attempt-*/maker.out"))
    return "\n".join(out.read_text(errors="replace") for out in outs)


def task_branch(root: Path) -> str:
    (branch,) = git(root, "for-each-ref", "--format=%(refname)", "refs/heads/loop/").split()
    return branch


def task_worktree(root: Path) -> Path:
    listed = git(root, "worktree", "list", "--porcelain").split("\n\n")
    (path,) = [
        block.split("\n", 1)[0].removeprefix("worktree ")
        for block in listed
        if "branch refs/heads/loop/" in block
    ]
    return Path(path)


def assert_main_checkout_untouched(root: Path, base: Path) -> None:
    """The user's files, index and branch are as they were, and no planted program ran."""
    assert (root / "calc.py").read_text() == BROKEN
    assert (root / "notes.txt").read_text() == NOTES
    assert git(root, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    status = git(root, "status", "--porcelain", "--", ".", ":(exclude).loop")
    assert status.splitlines() == [" M calc.py", "?? notes.txt"]
    assert not (base / "marker").exists(), (base / "marker").read_text()


def assert_only_the_fix_committed(root: Path, done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stdout + done.stderr
    branch = task_branch(root)
    assert len(git(root, "rev-list", branch, "--not", "main").split()) == 1
    assert "notes.txt" not in git(root, "ls-tree", "-r", "--name-only", branch).split("\n")
    assert git(root, "show", f"{branch}:calc.py") == FIXED
    assert git(root, "diff", "--name-only", "main", branch).split() == ["calc.py"]


def assert_refused_in_the_sandbox(root: Path, output: str) -> None:
    for how in ("config.worktree", "git-config", "rename"):
        assert f"PLANT {how} refused" in output, output
    # The admin folder's own `config` is written (git never reads it) and harms nothing.
    assert "PLANT admin-config planted" in output, output
    admin = Path(git(task_worktree(root), "rev-parse", "--absolute-git-dir").strip())
    assert (admin / "config.worktree").read_text() == ""  # the stand-in, still empty


@needs_bwrap
def test_the_sandbox_refuses_every_way_to_plant_config_worktree(tmp_path: Path) -> None:
    root = make_project(tmp_path, "absolute", "dotgit")

    done = loopctl(root, "run", "attack", "--once")

    output = maker_output(root)
    assert_refused_in_the_sandbox(root, output)
    assert "PLANT .git refused" in output, output
    assert_only_the_fix_committed(root, done)
    assert_main_checkout_untouched(root, tmp_path)


@needs_bwrap
def test_as_an_unprivileged_user_the_sandbox_refuses_it_too() -> None:
    runtime = unprivileged_python()
    if runtime is None:
        pytest.skip("needs root and an interpreter the account `nobody` can run")
    python, pythonpath = runtime
    base = Path(tempfile.mkdtemp(prefix="loopctl-admin-"))
    try:
        base.chmod(0o755)
        root = make_project(base, "relative", python=python)
        give_to("nobody", base)
        done = loopctl(root, "run", "attack", "--once", runtime=(python, pythonpath, "nobody"))
        assert_refused_in_the_sandbox(root, maker_output(root))
        assert_only_the_fix_committed(root, done)
        assert_main_checkout_untouched(root, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("form", ["absolute", "relative"])
def test_unconfined_the_plant_lands_and_loopctls_git_ignores_it(tmp_path: Path, form: str) -> None:
    root = make_project(tmp_path, form, mode="off")

    done = loopctl(root, "run", "attack", "--once")

    output = maker_output(root)
    assert "PLANT config.worktree planted" in output, output
    assert_only_the_fix_committed(root, done)
    assert_main_checkout_untouched(root, tmp_path)
    # The canary: plain git in that worktree, as a user (or loopctl before this fix) runs it,
    # takes the main checkout for the worktree and runs the planted fsmonitor.
    worktree = task_worktree(root)
    index = tmp_path / "canary-index"
    top = plain_git(worktree, index, "rev-parse", "--show-toplevel").strip()
    assert Path(top).resolve() == root.resolve()
    plain_git(worktree, index, "read-tree", "HEAD")
    plain_git(worktree, index, "add", "-A")
    assert "notes.txt" in plain_git(worktree, index, "ls-files")
    plain_git(worktree, index, "status", "--porcelain")
    ran = (tmp_path / "marker").read_text()
    assert any(label in ran for label in HOOKS_AND_FSMONITOR), ran


def test_a_snapshot_of_another_tree_is_refused_and_the_task_stops(tmp_path: Path) -> None:
    """Unconfined, the maker deletes its worktree's `.git` file; the worktree lies under a home
    kept in git, so git run there now works on the home's repository."""
    root = make_project(tmp_path, "absolute", "dotgit", mode="off", home_repo=True)
    home = tmp_path / "home"

    done = loopctl(root, "run", "attack", "--once")

    assert "PLANT .git planted" in maker_output(root), done.stdout + done.stderr
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    branch = task_branch(root)
    assert git(root, "rev-list", branch, "--not", "main") == ""  # nothing committed
    assert_main_checkout_untouched(root, tmp_path)
    assert git(home, "symbolic-ref", "HEAD").strip() == "refs/heads/dotfiles"
    assert git(home, "rev-list", "--all").count("\n") == 1
    assert (home / "notes.txt").read_text() == NOTES
    inbox = json.loads(loopctl(root, "inbox", "--json").stdout)["inbox"]
    reasons = " ".join(json.dumps(item) for item in inbox)
    assert "refusing to snapshot" in reasons, inbox
    assert "not the worktree itself" in reasons, inbox


def test_a_stand_in_never_replaces_opens_or_follows_what_is_already_there(tmp_path: Path) -> None:
    """The empty stand-in is made only where nothing is: a file is kept as it is, a link is not
    followed (its target is not created), and a FIFO does not block loopctl (an open for
    writing would wait for a reader forever)."""
    kept, link, fifo = tmp_path / "file", tmp_path / "link", tmp_path / "fifo"
    kept.write_text("[core]\n")
    link.symlink_to(tmp_path / "target")
    os.mkfifo(fifo)
    code = (
        "import sys; from pathlib import Path; from loopctl.sandbox.git_admin import stand_in\n"
        "for name in sys.argv[1:]: stand_in(Path(name))"
    )
    paths = [str(p) for p in (kept, link, fifo, tmp_path / "absent")]

    # A hang is the failure looked for: the bound is far above the milliseconds this takes.
    subprocess.run([PY, "-c", code, *paths], check=True, timeout=120)

    assert kept.read_text() == "[core]\n"
    assert not (tmp_path / "target").exists()
    assert (tmp_path / "absent").read_bytes() == b""
