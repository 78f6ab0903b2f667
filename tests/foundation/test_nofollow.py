"""loopctl.nofollow on real files: a link is unlinked, never entered, wherever it sits on the
path; folders a maker locked are opened up and deleted; the victim a link points at keeps its
names, modes and bytes."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest
from support.accounts import as_user, give_to, unprivileged_python
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


def test_the_trusted_folder_itself_is_never_removed_or_copied_over(tmp_path: Path) -> None:
    """`within` is loopctl's or the user's folder: a call naming it as the thing to remove or
    to replace is refused, not turned into a no-op or a wipe."""
    (tmp_path / "kept").write_text("kept\n")
    with pytest.raises(ValueError, match="trusted folder itself"):
        nofollow.remove_tree(tmp_path, within=tmp_path)
    with pytest.raises(ValueError, match="trusted folder itself"):
        nofollow.refresh_copy(tmp_path / "kept", tmp_path, within=tmp_path)
    assert (tmp_path / "kept").read_text() == "kept\n"


@pytest.mark.parametrize("relative", ["../elsewhere", "sub/../../elsewhere", "/etc"])
def test_a_relative_path_that_leaves_its_folder_is_refused(tmp_path: Path, relative: str) -> None:
    """`..` or an absolute path (which openat takes as is, whatever folder it is given) would
    open a folder outside `within`; neither is ever walked."""
    within = tmp_path / "within"
    (within / "sub").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(ValueError, match="not a path below its folder"):
        nofollow.open_folder(within, relative)
    with pytest.raises(ValueError, match="not a path below its folder"):
        nofollow.make_folders(within, f"{relative}/made")
    assert not (tmp_path / "elsewhere" / "made").exists()


def test_a_hard_link_planted_between_the_removal_and_the_write_is_never_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the sandbox off, what an agent left running can race loopctl: it links the
    victim's file back under the name loopctl has just removed (a hard link, which no
    O_NOFOLLOW sees). The new file is created exclusively, so the write fails and the victim
    keeps its bytes (write_new and refresh_copy's file copy)."""
    victim = victim_of(tmp_path)
    before = shape(victim)
    state = tmp_path / "state"
    state.mkdir()
    (state / "history.md").write_text("old\n")
    (state / "copy").write_text("old\n")
    removed = nofollow._remove_entry

    def then_planted(parent: int, name: str) -> None:
        removed(parent, name)
        os.link(victim / "file.txt", name, dst_dir_fd=parent)

    monkeypatch.setattr(nofollow, "_remove_entry", then_planted)
    with pytest.raises(FileExistsError):
        nofollow.write_new(state / "history.md", b"written\n", within=state)
    user = tmp_path / "user-file"
    user.write_text("the user's, newer\n")
    os.utime(state / "copy", (0, 0))
    nofollow.refresh_copy(user, state / "copy", within=state)  # the copy gives up, quietly

    assert shape(victim) == before


@pytest.mark.parametrize("standing", ["link", "file"])
def test_a_link_or_file_where_a_copied_folder_goes_is_replaced_by_the_folder(
    tmp_path: Path, standing: str
) -> None:
    """What the agent left where its CLI's state folder is copied (a link to a victim folder,
    a plain file) gives way to a real folder holding the user's files; the victim is kept."""
    victim = victim_of(tmp_path)
    before = shape(victim)
    source = tmp_path / "source"
    (source / "projects").mkdir(parents=True)
    (source / "settings.json").write_text("the user's\n")
    (source / "projects" / "p.jsonl").write_text("{}\n")
    layer = tmp_path / "layer"
    layer.mkdir()
    if standing == "link":
        (layer / "copy").symlink_to(victim)
    else:
        (layer / "copy").write_text("planted\n")

    nofollow.refresh_copy(source, layer / "copy", within=layer)

    assert not (layer / "copy").is_symlink()
    assert (layer / "copy" / "settings.json").read_text() == "the user's\n"
    assert (layer / "copy" / "projects" / "p.jsonl").read_text() == "{}\n"
    assert shape(victim) == before


UNPRIVILEGED_REMOVE = r"""
import os, sys
from pathlib import Path
from loopctl import nofollow
top = Path(sys.argv[1])
before = len(os.listdir("/proc/self/fd"))
nofollow.open_up(top / "wt" / "opened")
nofollow.remove_tree(top / "wt" / "removed")
try:
    nofollow.remove_tree(top / "wt" / "roots")
except PermissionError:
    refused = "refused"
try:
    os.close(nofollow.open_folder(top / "wt", "kept-locked/inner"))
except PermissionError:
    refused += "+entered"
leaked = len(os.listdir("/proc/self/fd")) - before
mode = os.stat(top / "wt" / "opened" / "locked").st_mode & 0o777
kept = os.stat(top / "wt" / "kept-locked").st_mode & 0o777
print(sorted(os.listdir(top / "wt")), oct(mode), oct(kept), refused, leaked)
"""


def test_as_an_unprivileged_user_locked_folders_are_opened_up_and_removed() -> None:
    """As root a folder the agent made mode 000 opens anyway; as its owner it must be given
    rwx back first (through an O_PATH descriptor on Linux), and a link beside it untouched.
    A folder it cannot open up (root's, mode 000, deep in a tree) fails the removal with
    PermissionError, and no descriptor is left open either way."""
    runtime = unprivileged_python()
    if runtime is None:
        pytest.skip("needs root and an interpreter the account `nobody` can run")
    python, pythonpath = runtime
    base = Path(tempfile.mkdtemp(prefix="loopctl-locked-", dir="/tmp"))
    try:
        base.chmod(0o755)
        victim = base / "victim"
        (victim / "sub").mkdir(parents=True)
        (victim / "sub").chmod(0o500)
        for name in ("opened", "removed"):
            locked = base / "wt" / name / "locked"
            (locked / "deeper").mkdir(parents=True)
            (locked / "deeper" / "f").write_text("x")
            (base / "wt" / name / "link").symlink_to(victim / "sub")
        (base / "wt" / "kept-locked" / "inner").mkdir(parents=True)
        give_to("nobody", base)
        (base / "wt" / "kept-locked").chmod(0)  # entered by open_folder: refused, not opened up
        (base / "wt" / "roots" / "a" / "b" / "root-only").mkdir(parents=True)
        give_to("nobody", base / "wt" / "roots")
        os.chown(base / "wt" / "roots" / "a" / "b" / "root-only", 0, 0)
        (base / "wt" / "roots" / "a" / "b" / "root-only").chmod(0)
        for name in ("opened", "removed"):
            (base / "wt" / name / "locked" / "deeper").chmod(0)
            (base / "wt" / name / "locked").chmod(0)
        env = {"PATH": "/usr/bin:/bin", **({"PYTHONPATH": pythonpath} if pythonpath else {})}
        if os.environ.get("PYTHONPATH"):  # a mutant's copy first
            env["PYTHONPATH"] = os.pathsep.join(
                filter(None, [os.environ["PYTHONPATH"], pythonpath])
            )

        done = subprocess.run(
            [python, "-c", UNPRIVILEGED_REMOVE, str(base)], capture_output=True, text=True,
            check=False, cwd="/", env=env, timeout=120, **as_user("nobody"),
        )  # fmt: skip

        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.split() == [
            "['kept-locked',", "'opened',", "'roots']", "0o700", "0o0", "refused+entered", "0",
        ]  # fmt: skip
        assert stat.S_IMODE((victim / "sub").stat().st_mode) == 0o500
    finally:
        for path in [base, *base.rglob("*")]:
            if not path.is_symlink():
                path.chmod(0o700)
        shutil.rmtree(base, ignore_errors=True)
