"""loopctl.nofollow on real files: a link is unlinked, never entered, wherever it sits on the
path; folders a maker locked are opened up and deleted; the victim a link points at keeps its
names, modes and bytes."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest
from support.processes import finishes

from loopctl import nofollow
from loopctl.engine.containment import objects_layer


def victim_of(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    (victim / "sub").mkdir(parents=True)
    (victim / "file.txt").write_text("mine\n")
    (victim / "sub").chmod(0o750)
    (victim / "file.txt").chmod(0o640)
    return victim


def shape(folder: Path) -> list[tuple[str, int, bytes]]:
    out = []
    for path in sorted([folder, *folder.rglob("*")]):
        info = path.lstat()
        data = path.read_bytes() if stat.S_ISREG(info.st_mode) else b""
        out.append((str(path), stat.S_IMODE(info.st_mode), data))
    return out


def test_a_link_on_the_way_is_refused_and_its_target_kept(tmp_path: Path) -> None:
    victim = victim_of(tmp_path)
    before = shape(victim)
    worktree = tmp_path / "wt"
    worktree.mkdir()
    (worktree / "deps").symlink_to(victim)
    for attempt in (
        lambda: nofollow.remove_tree(worktree / "deps" / "sub", within=worktree),
        lambda: nofollow.make_folders(worktree, "deps/new"),
    ):
        try:
            attempt()
        except OSError as exc:
            assert exc.errno in (errno.ELOOP, errno.ENOTDIR)  # noqa: PT017 (each in turn)
        else:
            pytest.fail("a link on the way was followed")
    assert shape(victim) == before


def test_a_tree_with_links_and_locked_folders_goes_and_the_victim_stays(tmp_path: Path) -> None:
    victim = victim_of(tmp_path)
    before = shape(victim)
    top = tmp_path / "wt"
    deep = top / "locked" / "a" / "b"
    deep.mkdir(parents=True)
    (deep / "f").write_text("x")
    (deep / "out").symlink_to(victim)
    (top / "link").symlink_to(victim)
    (top / "file-link").symlink_to(victim / "file.txt")
    for folder in (deep, deep.parent, top / "locked"):
        folder.chmod(0)
    nofollow.remove_tree(top)
    assert not top.exists()
    assert not top.is_symlink()
    assert shape(victim) == before


def test_a_deep_tree_does_not_hit_the_recursion_limit(tmp_path: Path) -> None:
    folder = tmp_path / "deep"
    folder.mkdir()
    fd = os.open(folder, os.O_RDONLY)
    try:
        for _ in range(1500):  # beyond Python's recursion limit, well below PATH_MAX issues
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = child
    finally:
        os.close(fd)
    nofollow.remove_tree(folder)
    assert not folder.exists()


def test_a_link_itself_is_unlinked(tmp_path: Path) -> None:
    victim = victim_of(tmp_path)
    before = shape(victim)
    (tmp_path / "link").symlink_to(victim)
    nofollow.remove_tree(tmp_path / "link")
    assert not (tmp_path / "link").is_symlink()
    nofollow.remove_tree(tmp_path / "missing")  # nothing there: nothing to do
    assert shape(victim) == before


def test_open_up_opens_folders_and_skips_links_and_named_folders(tmp_path: Path) -> None:
    victim = victim_of(tmp_path)
    before = shape(victim)
    top = tmp_path / "wt"
    (top / "a" / "b").mkdir(parents=True)
    (top / "kept").mkdir()
    (top / "link").symlink_to(victim)
    (top / "a" / "b").chmod(0o500)
    (top / "a").chmod(0)
    (top / "kept").chmod(0o500)
    nofollow.open_up(top, skip=["kept"])
    assert stat.S_IMODE((top / "a").stat().st_mode) == 0o700
    assert stat.S_IMODE((top / "a" / "b").stat().st_mode) == 0o700
    assert stat.S_IMODE((top / "kept").stat().st_mode) == 0o500
    assert shape(victim) == before


def test_write_new_replaces_a_planted_link_and_read_file_refuses_one(tmp_path: Path) -> None:
    victim = victim_of(tmp_path)
    before = shape(victim)
    state = tmp_path / "state"
    state.mkdir()
    (state / "history.md").symlink_to(victim / "file.txt")
    nofollow.write_new(state / "history.md", b"copied\n", within=state)
    assert not (state / "history.md").is_symlink()
    assert (state / "history.md").read_bytes() == b"copied\n"
    (state / "other.md").symlink_to(victim / "file.txt")
    with pytest.raises(OSError, match="Too many levels of symbolic links"):
        nofollow.read_file(state / "other.md", within=state)
    assert shape(victim) == before


def test_a_fifo_where_a_file_is_read_is_refused_at_once(tmp_path: Path) -> None:
    """An agent leaves a FIFO where loopctl reads a file (node_links' marker): open(2) of a
    FIFO with no writer blocks for ever, and loopctl with it, unless O_NONBLOCK."""
    state = tmp_path / "state"
    state.mkdir()
    os.mkfifo(state / "marker")

    raised = finishes(lambda: nofollow.read_file(state / "marker", within=state))

    assert isinstance(raised, OSError), raised
    assert raised.errno == errno.EINVAL


def test_a_fifo_where_a_folder_is_entered_is_refused_at_once(tmp_path: Path) -> None:
    """A FIFO standing where loopctl enters a folder (a path component under a folder an agent
    wrote): O_DIRECTORY refuses it (ENOTDIR) before open(2) could wait for a writer."""
    worktree = tmp_path / "wt"
    worktree.mkdir()
    os.mkfifo(worktree / "packages")

    entered = finishes(lambda: os.close(nofollow.open_folder(worktree, "packages/b")))
    made = finishes(lambda: nofollow.make_folders(worktree, "packages/b"))

    assert isinstance(entered, NotADirectoryError), entered
    assert isinstance(made, NotADirectoryError), made


def test_the_object_layer_lies_beside_the_writable_state_folder(tmp_path: Path) -> None:
    from loopctl import sandbox

    state = tmp_path / "attempt-1" / "maker-state"
    layer = objects_layer(state)
    assert layer.parent == state.parent
    assert not layer.is_relative_to(state)
    if sandbox.probe()[0] is None:
        pytest.skip("no sandbox here")
    worktree = tmp_path / "wt"
    worktree.mkdir()
    with pytest.raises(ValueError, match="inside writable"):
        sandbox.make_sandbox(root=tmp_path, worktree=worktree, objects_layer=worktree / "x")


def open_descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")
def test_no_operation_leaves_a_descriptor_open_whether_it_succeeds_or_fails(
    tmp_path: Path,
) -> None:
    """`loopctl up` runs these after every turn for weeks: a descriptor left open per call
    (a dropped `os.close`, on the way in or on a refusal) ends in EMFILE, and every later
    turn fails. Each operation, on success and on each refusal, leaves the count as it was."""
    victim = victim_of(tmp_path)
    top = tmp_path / "wt"
    deep = top / "locked" / "a"
    deep.mkdir(parents=True)
    (deep / "f").write_text("x")
    (top / "link").symlink_to(victim)
    os.mkfifo(top / "fifo")
    (top / "file.txt").write_text("mine\n")
    source = tmp_path / "source"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "f").write_text("the user's\n")
    (source / "ln").symlink_to("sub/f")
    before = open_descriptors()

    os.close(nofollow.open_folder(top, "locked/a"))
    nofollow.make_folders(top, "new/b/c")
    nofollow.open_up(top / "locked")
    assert nofollow.read_file(top / "file.txt", within=top) == b"mine\n"
    nofollow.write_new(top / "new" / "w", b"w", within=top)
    nofollow.refresh_copy(source, top / "copy", within=top)
    nofollow.refresh_copy(source / "sub" / "f", top / "copy-file", within=top)
    for refused in (
        lambda: nofollow.open_folder(top, "link/sub"),
        lambda: nofollow.open_folder(top, "fifo/x"),
        lambda: nofollow.make_folders(top, "link/x"),
        lambda: nofollow.make_folders(top, "fifo/x"),
        lambda: nofollow.read_file(top / "link" / "file.txt", within=top),
        lambda: nofollow.read_file(top / "fifo", within=top),
        lambda: nofollow.read_file(top / "locked", within=top),
        lambda: nofollow.write_new(top / "link" / "x", b"x", within=top),
    ):
        with pytest.raises(OSError, match=r"symbolic links|Not a directory|not a regular"):
            refused()
    (deep).chmod(0)
    nofollow.remove_tree(top / "locked")
    nofollow.remove_tree(top)

    assert open_descriptors() == before
    assert not top.exists()
    assert (victim / "file.txt").read_text() == "mine\n"


def test_read_regular_reads_a_file_and_refuses_a_fifo_a_device_or_a_link_at_once(
    tmp_path: Path,
) -> None:
    """What loopctl hashes in a worktree after the turn (engine.context.file_hashes): a FIFO
    would block the open for ever, /dev/zero the read; a link's target is not the file."""
    (tmp_path / "file").write_bytes(b"bytes\n")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "zero").symlink_to("/dev/zero")
    (tmp_path / "link").symlink_to("file")
    before = open_descriptors()

    assert nofollow.read_regular(tmp_path / "file") == b"bytes\n"
    for name in ("fifo", "zero", "link"):
        raised = finishes(lambda name=name: nofollow.read_regular(tmp_path / name))
        assert isinstance(raised, OSError), (name, raised)
    device = finishes(lambda: nofollow.read_regular(Path("/dev/zero")))
    assert isinstance(device, OSError)
    assert device.errno == errno.EINVAL
    assert open_descriptors() == before
