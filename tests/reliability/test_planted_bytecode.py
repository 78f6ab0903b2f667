"""A check runs the worktree's sources, never bytecode a maker planted beside them.

The maker (tests/agents/plants_bytecode.py, a real `command` agent) leaves calc.py and the test
unchanged, so `git diff` shows nothing, and writes `__pycache__` files whose headers match those
sources: plain Python and pytest would run the planted code instead. Each trick is first shown
to work on a plain clone; loopctl's check must still fail, remove what was planted (unlinking a
planted link, never following it) and commit nothing. Sandbox on and off: the check's own
clean-up holds without the sandbox.

The same maker on a real project (humanize, a `src/` layout installed with `pip install -e .`)
is in tests/corpus/test_real_projects.py, beside the other corpus tests: it needs the fetched
corpus and the pins in scripts/, which a mutation run's copy of the tree (bench/) leaves out.

With loopctl run by an unprivileged account (`nobody`, support.accounts), sandbox on, the
checkout and HOME its own and outside /tmp: what that account's maker planted is removed by
that account's loopctl, and the check fails as it does for root.
"""

from __future__ import annotations

import pwd
import subprocess
import sys
from pathlib import Path

import pytest
from support.accounts import give_to, loopctl_as, runtime
from support.cli import invoke
from support.journal import events
from support.outside_tmp import outside_tmp
from support.repos import (
    PYTEST_CHECK,
    commit_all,
    git,
    loop_worktrees,
    make_project,
    make_repo,
)

from loopctl.checks import bytecode
from loopctl.checks.bytecode import planted_caches

PY = sys.executable
AGENT = Path(__file__).parents[1] / "agents" / "plants_bytecode.py"
SANDBOX_OFF = '\n[sandbox]\nmode = "off"\n'


def plain_pytest_passes_after(trick: str, repo: Path, clone: Path, *args: str) -> bool:
    """Whether the trick turns a plain `pytest` green in a clone of `repo`'s base."""
    git(clone.parent, "clone", "-q", str(repo), str(clone))
    subprocess.run([PY, str(AGENT), trick, *args], cwd=clone, input="", check=True, text=True)
    done = subprocess.run(
        [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=clone,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(clone)},
    )
    return done.returncode == 0


@pytest.mark.parametrize("sandbox", ["on", "off"])
@pytest.mark.parametrize("trick", ["code", "test", "link"])
def test_bytecode_planted_beside_an_unchanged_source_is_never_run(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trick: str, sandbox: str
) -> None:
    with outside_tmp("planted") as outside:
        args = (str(outside),) if trick == "link" else ()
        config = SANDBOX_OFF if sandbox == "off" else ""
        make_project(repo, "plants_bytecode.py", trick, *args, check=None, config_extra=config)
        # The attack is real: in a plain clone, the planted bytecode passes the broken add().
        assert plain_pytest_passes_after(trick, repo, tmp_path / "plain", str(outside / "plain"))

        result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")

        assert result.exit_code == 1, result.output
        (attempt,) = events(repo, "attempt_finished")
        assert attempt.data["verdict"] == "failed", attempt.data
        assert events(repo, "commit_created") == []
        # The check ran the real test against the real add(): the real assert failed.
        assert "assert -1 == 5" in attempt.data["output_tail"], attempt.data
        # What was planted is gone from the worktree; a planted link was unlinked, and the
        # folder it pointed at (the agent's own, outside) is as the agent left it.
        (kept,) = loop_worktrees(repo)
        assert planted_caches(Path(kept["worktree"])) == []
        if trick == "link":
            assert [p.name for p in (outside / "code").iterdir()] == [
                f"calc.{sys.implementation.cache_tag}.pyc"
            ]


def test_a_cache_folder_the_base_tracks_is_kept_and_no_cached_bytecode_is_read(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A project that commits a file inside a __pycache__ (a fixture, a vendored tree): removing
    # it would change the work. It stays, and the check reads no cached bytecode at all.
    make_project(repo, "plants_bytecode.py", "code", check=PYTEST_CHECK)
    (repo / "vendor" / "__pycache__").mkdir(parents=True)
    (repo / "vendor" / "__pycache__" / "README").write_text("kept on purpose\n")
    git(repo, "add", "-f", "vendor/__pycache__/README")
    commit_all(repo, "a tracked file in a cache folder")

    result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")

    assert result.exit_code == 1, result.output
    (attempt,) = events(repo, "attempt_finished")
    assert attempt.data["verdict"] == "failed", attempt.data
    (kept,) = loop_worktrees(repo)
    worktree = Path(kept["worktree"])
    assert (worktree / "vendor" / "__pycache__" / "README").read_text() == "kept on purpose\n"
    # The planted file was not removed (nothing is, then), and was not read either.
    assert (worktree / "__pycache__").is_dir()


def test_a_passing_check_leaves_no_bytecode_to_commit(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No `__pycache__/` in .gitignore: whatever bytecode the check wrote would be committed.
    # (A developer's own PYTHONDONTWRITEBYTECODE would hide what loopctl does.) Sandbox off:
    # on, the check may not write the worktree at all, and the setting under test is moot.
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    make_project(repo, "fixer.py", check=None, config_extra=SANDBOX_OFF)
    (repo / ".gitignore").write_text(".pytest_cache/\n")
    commit_all(repo, "nothing ignored but pytest's cache")

    result = invoke(monkeypatch, repo, "goal", "tests green")

    assert result.exit_code == 0, result.output
    files = git(repo, "ls-tree", "-r", "--name-only", "loop/goal/tests-green").split()
    assert [f for f in files if "__pycache__" in f or f.endswith(".pyc")] == []
    assert "calc.py" in files


def test_every_cache_folder_is_found_and_none_is_entered(tmp_path: Path) -> None:
    root = tmp_path / "w"
    for folder in ("__pycache__", "a/b/__pycache__", "a/__pycache__", ".venv/lib/x/__pycache__"):
        (root / folder).mkdir(parents=True)
        (root / folder / "m.pyc").write_bytes(b"x")
    (root / "a" / "__pycache__" / "__pycache__").mkdir()  # inside one found: not listed again
    (root / ".git").mkdir()
    (root / ".git" / "__pycache__").mkdir()  # git's own folder is not the check's
    (root / "c").mkdir()
    (root / "c" / "__pycache__").write_text("a file in its place")
    (root / "d").mkdir()
    (root / "d" / "__pycache__").symlink_to(tmp_path / "elsewhere")  # dangling, still found
    (tmp_path / "outside" / "__pycache__").mkdir(parents=True)
    (root / "e").symlink_to(tmp_path / "outside")  # a link to a folder is not entered

    assert planted_caches(root) == [
        ".venv/lib/x/__pycache__",
        "__pycache__",
        "a/__pycache__",
        "a/b/__pycache__",
        "c/__pycache__",
        "d/__pycache__",
    ]


def test_a_link_that_appears_after_the_walk_is_unlinked_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Sandbox off, a process the agent left behind may swap a folder for a link between the
    # walk and the removal: the removal opens each component itself and follows none.
    worktree, victim = make_repo(tmp_path / "w"), tmp_path / "victim"
    (victim / "b" / "__pycache__").mkdir(parents=True)
    (victim / "b" / "__pycache__" / "kept.pyc").write_bytes(b"not the worktree's")
    (worktree / "a").symlink_to(victim)
    monkeypatch.setattr(bytecode, "planted_caches", lambda _: ["a/b/__pycache__"])

    added = bytecode.check_bytecode_env(
        worktree, git(worktree, "rev-parse", "HEAD").strip(), tmp_path / "own"
    )

    assert (victim / "b" / "__pycache__" / "kept.pyc").read_bytes() == b"not the worktree's"
    # What could not be removed is not read: the check gets a bytecode cache of its own.
    assert added == {"PYTHONPYCACHEPREFIX": str(tmp_path / "own")}


@pytest.mark.parametrize("trick", ["code", "link"])
def test_bytecode_planted_is_never_run_when_an_unprivileged_user_runs_loopctl(trick: str) -> None:
    # Skips only where no account but ours can run loopctl here (not root, or no interpreter
    # `nobody` can start); the test's own may sit under root's home, out of its reach.
    python, pythonpath = runtime("nobody")
    with outside_tmp("nobody") as base:
        repo, home, theirs = base / "repo", base / "home", base / "agent" / "own"
        home.mkdir()
        theirs.mkdir(parents=True)
        make_repo(repo)
        # The system interpreter finds this checkout's loopctl and pytest through PYTHONPATH,
        # in the maker's and the check's environment as well.
        allow = '\n[env]\nallow = ["PYTHONPATH"]\n' if pythonpath else ""
        args = (str(theirs),) if trick == "link" else ()
        make_project(
            repo, "plants_bytecode.py", trick, *args, check=None, config_extra=allow, python=python
        )
        give_to("nobody", base)

        done = loopctl_as("nobody", repo, home, "goal", "tests green", "--max-iterations", "1")

        assert done.returncode == 1, done.stdout + done.stderr
        assert "agents run unconfined" not in done.stderr
        (attempt,) = events(repo, "attempt_finished")
        assert attempt.data["verdict"] == "failed", attempt.data
        assert events(repo, "commit_created") == []
        assert "assert -1 == 5" in attempt.data["output_tail"], attempt.data
        outs = repo.glob(".loop/runs/*/*/attempt-*/maker.out")
        assert f"planted {trick}" in "".join(out.read_text() for out in outs)
        (kept,) = loop_worktrees(repo)
        worktree = Path(kept["worktree"])
        # That account's loopctl made the worktree (and so removed what was planted in it).
        assert worktree.stat().st_uid == pwd.getpwnam("nobody").pw_uid
        assert planted_caches(worktree) == []
        if trick == "link":
            # Unlinked, not followed: the account's own folder is as its maker left it.
            assert [p.name for p in (theirs / "code").iterdir()] == [
                f"calc.{sys.implementation.cache_tag}.pyc"
            ]
