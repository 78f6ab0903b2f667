"""Places the sandbox binds writable, spelled through a link: a HOME under a linked `/home`, a
`~/.cache` linked elsewhere (where loopctl keeps its worktrees), a dotfiles folder. bwrap
walks to each mount point from its new root, where an absolute link leads nowhere: it stopped
with "Can't mkdir", and no sandboxed agent ever started. Each place is now bound where it leads
(policy.wrap), and under /tmp the folder holding the link is shown read-only first.

Under /tmp and outside it (`place`), with the real CLI, a real agent process and bubblewrap.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import assert_clean_exit, run_loopctl
from support.outside_tmp import Place
from support.repos import GOAL_BRANCH, PYTEST_CHECK, git, make_project, make_repo

from loopctl import process, sandbox

pytestmark = pytest.mark.skipif(
    sandbox.probe()[0] != "bwrap", reason=f"no bwrap sandbox here: {sandbox.probe()[2]}"
)


def test_a_goal_runs_with_loopctls_worktrees_behind_a_linked_folder(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LOOPCTL_HOME under `cache -> real-cache` (an absolute link: a relative one bwrap could
    walk already): the worktree, its state folder and the agent's private places are all
    spelled through the link. The sandboxed agent fixes the bug in its worktree, the check
    passes, and the fix lands on the goal's branch."""
    (place.base / "real-cache").mkdir()
    (place.base / "cache").symlink_to(place.base / "real-cache")
    monkeypatch.setenv("LOOPCTL_HOME", str(place.base / "cache" / "loopctl"))
    repo = make_project(make_repo(place.base / "repo"), "fixer.py", check=PYTEST_CHECK)

    done = run_loopctl(repo, "goal", "tests green", timeout=240)

    assert_clean_exit(done, 0)
    assert "return a + b" in git(repo, "show", f"{GOAL_BRANCH}:calc.py")
    # The worktree really was under the link's target.
    assert (place.base / "real-cache" / "loopctl" / "worktrees").is_dir()


def test_a_declared_write_folder_behind_a_linked_folder_is_the_one_written(place: Place) -> None:
    """`[sandbox] write` naming `~/.cache/tool`, with `~/.cache` a link into a dotfiles folder:
    the agent writes there (so in the folder the link leads to), and the run goes on."""
    dotfiles = place.base / "dotfiles" / "cache"
    (dotfiles / "tool").mkdir(parents=True)
    (place.home / ".cache").symlink_to(dotfiles)
    note = place.home / ".cache" / "tool" / "note"
    repo = make_repo(place.base / "repo")
    make_project(repo, "fixes_and_notes.py", note, check=PYTEST_CHECK)

    done = run_loopctl(repo, "goal", "tests green", timeout=240)

    assert_clean_exit(done, 0)
    assert (dotfiles / "tool" / "note").read_text() == "kept"
    assert "return a + b" in git(repo, "show", f"{GOAL_BRANCH}:calc.py")


@pytest.mark.parametrize("link", ["absolute", "relative"])
def test_a_dotfiles_linked_cli_state_is_copied_and_the_dotfiles_stay_as_they_were(
    place: Place, link: str
) -> None:
    """`~/.claude` and `~/.claude.json` linked into a dotfiles folder (stow, yadm, home-manager):
    the private copy is bound where each link leads. The agent starts, reads the user's
    settings in its copy, and what it writes there never reaches the dotfiles."""
    dotfiles = place.base / "dotfiles"
    (dotfiles / "claude").mkdir(parents=True)
    (dotfiles / "claude" / "settings.json").write_text('{"model": "the user\'s"}\n')
    (dotfiles / "claude.json").write_text('{"numStartups": 7}\n')
    for name, target in ((".claude", "claude"), (".claude.json", "claude.json")):
        leads = dotfiles / target if link == "absolute" else Path("..", "dotfiles", target)
        (place.home / name).symlink_to(leads)
    work = place.base / "work"
    work.mkdir()
    box = sandbox.make_sandbox(
        root=work, worktree=work, cli="claude", cli_layer=place.base / "layer" / "maker"
    )
    script = (
        'cat "$HOME/.claude/settings.json" "$HOME/.claude.json"'
        ' && echo planted > "$HOME/.claude/settings.json"'
        ' && echo planted > "$HOME/.claude.json" && echo written'
    )
    env = {"HOME": str(place.home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}

    done = process.run(["/bin/sh", "-c", script], cwd=work, env=env, timeout=120, sandbox=box)

    assert done.ok, done.output_tail()
    assert done.stdout_tail.split("\n") == [
        '{"model": "the user\'s"}',
        '{"numStartups": 7}',
        "written",
        "",
    ]
    assert (dotfiles / "claude" / "settings.json").read_text() == '{"model": "the user\'s"}\n'
    assert (dotfiles / "claude.json").read_text() == '{"numStartups": 7}\n'
    assert (place.home / ".claude").is_symlink()
