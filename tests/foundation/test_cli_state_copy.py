"""The private copy of an agent CLI's state (issue 24, item 3): how it is refreshed from the
user's own, without following a link the agent left in it, and where it may live."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from loopctl import nofollow, sandbox
from loopctl.errors import UsageError


def user_state(tmp_path: Path) -> Path:
    source = tmp_path / "home" / ".claude"
    (source / "projects" / "p").mkdir(parents=True)
    (source / "plugins").mkdir()
    (source / "settings.json").write_text("user 1\n")
    (source / "plugins" / "config.json").write_text("plugins\n")
    (source / "projects" / "p" / "old.jsonl").write_text("history\n")
    (source / "hook.sh").write_text("#!/bin/sh\n")
    (source / "hook.sh").chmod(0o755)
    (source / "shared").symlink_to("../dotfiles/shared")
    return source


def test_a_fresh_copy_has_the_users_files_modes_and_links_but_not_the_skipped(
    tmp_path: Path,
) -> None:
    source, layer = user_state(tmp_path), tmp_path / "layer"
    layer.mkdir()
    copy = layer / "home" / ".claude"
    nofollow.refresh_copy(source, copy, within=layer, skip={"projects"})
    assert (copy / "settings.json").read_text() == "user 1\n"
    assert (copy / "plugins" / "config.json").read_text() == "plugins\n"
    assert os.access(copy / "hook.sh", os.X_OK)
    assert os.readlink(copy / "shared") == "../dotfiles/shared"
    assert not (copy / "projects").exists()


def test_the_newer_file_wins_and_what_the_agent_added_stays(tmp_path: Path) -> None:
    source, layer = user_state(tmp_path), tmp_path / "layer"
    layer.mkdir()
    copy = layer / "home" / ".claude"
    nofollow.refresh_copy(source, copy, within=layer)
    # The CLI refreshed a credential in its copy: newer than the user's, it is kept.
    (copy / "settings.json").write_text("written by the CLI\n")
    (copy / "session.jsonl").write_text("a session\n")
    os.utime(source / "settings.json", ns=(0, (copy / "settings.json").stat().st_mtime_ns - 10))
    nofollow.refresh_copy(source, copy, within=layer)
    assert (copy / "settings.json").read_text() == "written by the CLI\n"
    # The user logs in again: their file is newer now, and replaces the copy's.
    (source / "settings.json").write_text("user 2\n")
    os.utime(source / "settings.json", ns=(0, (copy / "settings.json").stat().st_mtime_ns + 10))
    nofollow.refresh_copy(source, copy, within=layer)
    assert (copy / "settings.json").read_text() == "user 2\n"
    assert (copy / "session.jsonl").read_text() == "a session\n"


def test_links_left_in_the_copy_are_replaced_never_written_through(tmp_path: Path) -> None:
    source, layer = user_state(tmp_path), tmp_path / "layer"
    layer.mkdir()
    copy = layer / "home" / ".claude"
    nofollow.refresh_copy(source, copy, within=layer)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "file").write_text("victim\n")
    # What an agent in the sandbox can do inside its copy: links where loopctl will write.
    (copy / "settings.json").unlink()
    (copy / "settings.json").symlink_to(victim / "file")
    (copy / "plugins" / "config.json").unlink()
    (copy / "plugins").rmdir()
    (copy / "plugins").symlink_to(victim)
    nofollow.refresh_copy(source, copy, within=layer)
    assert sorted(p.name for p in victim.iterdir()) == ["file"]
    assert (victim / "file").read_text() == "victim\n"
    assert not (copy / "settings.json").is_symlink()
    assert (copy / "settings.json").read_text() == "user 1\n"
    assert (copy / "plugins" / "config.json").read_text() == "plugins\n"
    # A link in place of the copy itself, or on the way to it: nothing is made through it.
    (layer / "other").symlink_to(victim)
    with pytest.raises(OSError, match=r"symbolic links|Not a directory"):
        nofollow.refresh_copy(source, layer / "other" / ".claude", within=layer)
    assert sorted(p.name for p in victim.iterdir()) == ["file"]


def test_a_single_state_file_is_copied_when_newer(tmp_path: Path) -> None:
    home, layer = tmp_path / "home", tmp_path / "layer"
    home.mkdir()
    layer.mkdir()
    (home / ".claude.json").write_text('{"user": 1}\n')
    copy = sandbox.private_copy(layer, home / ".claude.json", home)
    assert copy == layer / "home" / ".claude.json"
    nofollow.refresh_copy(home / ".claude.json", copy, within=layer)
    assert copy.read_text() == '{"user": 1}\n'
    assert sandbox.private_copy(layer, tmp_path / "codex", home) == (
        layer / "root" / tmp_path.relative_to("/") / "codex"
    )


def test_the_private_layer_may_not_lie_where_the_agent_writes(tmp_path: Path) -> None:
    root, worktree, home = (tmp_path / name for name in ("repo", "work", "home"))
    for folder in (root, worktree, home):
        folder.mkdir()
    layer = home / ".cache" / "loopctl" / "cli-state" / "x" / "loop" / "maker"
    with pytest.raises(UsageError, match="narrower folder"):
        sandbox.make_sandbox(
            root=root, worktree=worktree, cli="claude", writable=[str(home / ".cache")],
            cli_layer=layer,
        )  # fmt: skip
    with pytest.raises(UsageError):
        sandbox.make_sandbox(root=root, worktree=worktree, cli="claude", cli_layer=worktree / "l")
    box = sandbox.make_sandbox(root=root, worktree=worktree, cli="claude", cli_layer=layer)
    assert box.cli_layer == layer


def test_a_refresh_keeps_the_users_times_and_links_and_what_the_agent_wrote_in_folders(
    tmp_path: Path,
) -> None:
    """A copied file keeps the user's modification time (so that a later refresh can tell
    whose file is newer), a link the user has replaces whatever the agent left under its
    name, and a folder the agent wrote into is kept with what it holds."""
    source, layer = user_state(tmp_path), tmp_path / "layer"
    layer.mkdir()
    copy = layer / "home" / ".claude"
    os.utime(source / "settings.json", ns=(1_000_000_000, 1_234_567_890_000_000_000))
    nofollow.refresh_copy(source, copy, within=layer)
    assert (copy / "settings.json").stat().st_mtime_ns == 1_234_567_890_000_000_000
    (copy / "shared").unlink()
    (copy / "shared").write_text("the agent's file where the user has a link\n")
    (copy / "plugins" / "cache.json").write_text("the agent's\n")

    nofollow.refresh_copy(source, copy, within=layer)

    assert os.readlink(copy / "shared") == "../dotfiles/shared"
    assert (copy / "plugins" / "cache.json").read_text() == "the agent's\n"
    assert (copy / "plugins" / "config.json").read_text() == "plugins\n"
