"""The sandbox holds where users keep their repositories, not only under /tmp (issue 27, 1-2).

Each test runs a real program in the sandbox loopctl builds (tests/programs/confined_run.py, a
process of the account under test: the caller, root in CI, and `nobody`), with the checkout and
HOME under /tmp and outside it (support.outside_tmp). The program (tests/programs/tries_paths.py)
tries to write, delete and read what an agent must not; every verdict is read on the host. Each
test names the one-line mutant of loopctl/sandbox/ it kills; each was applied in a copy of the
package put first on PYTHONPATH, and the test failed (see the issue's report).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pwd
import re
import select
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.accounts import give_to
from support.confined import driver, tries
from support.outside_tmp import Place
from support.repos import git, make_repo

from loopctl import sandbox

PY = sys.executable
# The guide's sandbox page, where README.md's sandbox table moved (issue 29).
README = Path(__file__).resolve().parents[2] / "docs" / "sandbox.md"
USERS = pytest.mark.parametrize("user", [None, "nobody"], ids=["caller", "nobody"])
SECRET = "credential-material-2727"

pytestmark = pytest.mark.skipif(
    sandbox.probe()[0] != "bwrap", reason=f"no bwrap sandbox here: {sandbox.probe()[2]}"
)


def worktree_of(root: Path, folder: Path) -> Path:
    git(root, "worktree", "add", "-q", "-b", "loop/t/1", str(folder))
    return folder


# --- the whole host stays read-only ------------------------------------------------------------


@USERS
def test_the_agent_writes_nothing_of_the_host_but_its_worktree(
    place: Place, user: str | None
) -> None:
    """Kills `--ro-bind / /` -> `--bind / /`: outside /tmp nothing else stands in the way (the
    checkout's targeted read-only bind is made only for folders the private /tmp hides)."""
    checkout = make_repo(place.base / "checkout")
    (checkout / ".loop").mkdir()
    (checkout / ".loop" / "config.toml").write_text("version = 1\n")
    other = make_repo(place.base / "other-repo")
    (place.home / ".bashrc").write_text("# the user's own shell setup\n")
    worktree = worktree_of(checkout, place.base / "worktrees" / "t-1")
    victims = [
        checkout / ".loop" / "config.toml",
        checkout / ".git" / "config",
        checkout / "README.md",
        place.home / ".bashrc",
        other / "README.md",
        other / ".git" / "config",
    ]
    new_files = [checkout / ".loop" / "planted.toml", place.home / ".profile", other / "new.txt"]
    before = {victim: victim.read_bytes() for victim in victims}
    if user is not None:
        give_to(user, place.base)

    seen = tries(
        user, checkout, worktree, place.home, write=[*victims, *new_files, worktree / "ok"]
    )

    assert seen["write"][str(worktree / "ok")] == "written"  # the probe does write where it may
    for victim in victims:
        assert seen["write"][str(victim)] != "written", victim
        assert victim.read_bytes() == before[victim], victim
    for planted in new_files:
        assert seen["write"][str(planted)] != "written", planted
        assert not planted.exists(), planted


@USERS
def test_an_agent_in_place_cannot_touch_the_repositorys_objects_index_or_refs(
    place: Place, user: str | None
) -> None:
    """Kills `.git` dropped from PROTECTED_IN_CHECKOUT: in place the checkout is bound writable,
    and only that read-only bind keeps `.git` as it is."""
    checkout = make_repo(place.base / "checkout")
    dot_git = checkout / ".git"
    loose = next(p for p in (dot_git / "objects").rglob("*") if p.is_file() and len(p.name) == 38)
    victims = [dot_git / "index", dot_git / "refs" / "heads" / "main", dot_git / "HEAD"]
    forged = [loose.parent / ("0" * 38), dot_git / "refs" / "heads" / "forged"]
    before = {p: p.read_bytes() for p in [*victims, loose]}
    if user is not None:
        give_to(user, place.base)

    seen = tries(
        user, checkout, checkout, place.home,
        write=[*victims, *forged, checkout / "work.py"], remove=[loose],
    )  # fmt: skip

    assert seen["write"][str(checkout / "work.py")] == "written"  # in place: the checkout is its
    for path in [*victims, *forged]:
        assert seen["write"][str(path)] != "written", path
    assert seen["remove"][str(loose)] != "removed"
    for path, content in before.items():
        assert path.read_bytes() == content, path
    assert not any(p.exists() for p in forged)
    assert git(checkout, "fsck", "--no-progress", "--strict").strip() == ""


# --- what the agent cannot read ----------------------------------------------------------------


def readme_hidden_paths(until: str | None = None) -> list[str]:
    """The `~/…` paths README's sandbox table says an agent cannot see (those before `until`)."""
    row = next(line for line in README.read_text().splitlines() if line.startswith("| cannot see"))
    if until is not None:
        assert until in row, f"README's row no longer says {until!r}"
        row = row.split(until, 1)[0]
    return [found[2:] for found in re.findall(r"`(~/[^`]+)`", row)]


# Pinned here, independent of the code: a store dropped from CREDENTIAL_STORES that README does
# not name (`.vault-token`, `.cargo/credentials.toml`) is still planted, and found readable.
KNOWN_STORES = (
    *(".ssh", ".gnupg", ".git-credentials", ".config/git/credentials", ".config/gh"),
    *(".config/hub", ".aws", ".azure", ".config/gcloud", ".kube", ".docker/config.json"),
    *(".netrc", ".npmrc", ".pypirc", ".cargo/credentials", ".cargo/credentials.toml"),
    *(".terraform.d/credentials.tfrc.json", ".password-store", ".local/share/keyrings"),
    ".vault-token",
)
FOLDER_STORES = frozenset(
    {".ssh", ".gnupg", ".aws", ".azure", ".kube", ".password-store", ".config/gh", ".config/hub"}
    | {".config/gcloud", ".local/share/keyrings", ".mozilla", ".config/google-chrome", ".var/app"}
)


def plant(home: Path, relative: str, secret: str) -> None:
    path = home / relative
    if relative in FOLDER_STORES or relative.startswith("snap/"):
        path.mkdir(parents=True, exist_ok=True)
        (path / "secret").write_text(secret + "\n")
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secret + "\n")


@USERS
def test_every_credential_store_the_constant_or_the_readme_names_is_unreadable(
    place: Place, user: str | None
) -> None:
    """Kills dropping any one entry from CREDENTIAL_STORES (e.g. `.docker/config.json`): each
    store this test knows, the constant names or README's table lists holds its own secret, and
    none is read; and every store README names is in the constant."""
    from_readme = readme_hidden_paths()
    assert ".docker/config.json" in from_readme, "README's table no longer lists the stores"
    # The stores README names are in the constant (one dropped from the constant alone fails
    # here too, besides being read below).
    stores = readme_hidden_paths(until="other credential stores")
    assert [entry for entry in stores if entry not in sandbox.CREDENTIAL_STORES] == []
    wanted = sorted({*KNOWN_STORES, *sandbox.CREDENTIAL_STORES, *from_readme})
    secrets = {relative: f"{SECRET}-{index}" for index, relative in enumerate(wanted)}
    for relative, secret in secrets.items():
        plant(place.home, relative, secret)
    checkout = make_repo(place.base / "checkout")
    worktree = worktree_of(checkout, place.base / "worktrees" / "t-1")
    if user is not None:
        give_to(user, place.base)

    seen = tries(user, checkout, worktree, place.home, read=[place.home / r for r in wanted])

    leaked = [r for r, secret in secrets.items() if secret in seen["read"][str(place.home / r)]]
    assert leaked == []
    # The probe reads what is not hidden: a file beside the stores.
    (place.home / "notes.txt").write_text("visible\n")
    assert tries(user, checkout, worktree, place.home, read=[place.home / "notes.txt"])["read"] == {
        str(place.home / "notes.txt"): "visible\n"
    }


def _store_in_passwd_home() -> Iterator[tuple[Path, bytes]]:
    """A credential store in the account's own home: one that is there already (read, never
    changed), else one made in a folder that exists (never at the home's top level, which the
    suite's guard watches) and removed afterwards."""
    home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    for relative in sandbox.CREDENTIAL_STORES:
        path = home / relative
        if path.is_file() and os.access(path, os.R_OK) and path.stat().st_size > 0:
            yield path, path.read_bytes()
            return
    for relative in sandbox.CREDENTIAL_STORES:
        path = home / relative
        if "/" not in relative or path.exists() or not path.parent.is_dir():
            continue
        secret = f"{SECRET}-{uuid.uuid4().hex}\n".encode()
        try:
            path.write_bytes(secret)
        except OSError:
            continue
        try:
            yield path, secret
        finally:
            path.unlink(missing_ok=True)
        return
    pytest.skip(f"no credential store in {home}, and none can be made in one of its folders")


def test_a_store_in_the_accounts_own_home_stays_hidden_when_home_points_elsewhere(
    place: Place,
) -> None:
    """Kills hiding the stores under $HOME only (`_passwd_home` dropped from `hidden_paths`):
    with HOME changed (CI, `sudo -E`, a unit) the account's real keys are still hidden. As the
    caller only: `nobody`'s passwd home does not exist."""
    assert Path(pwd.getpwuid(os.getuid()).pw_dir) != place.home
    checkout = make_repo(place.base / "checkout")
    worktree = worktree_of(checkout, place.base / "worktrees" / "t-1")
    for store, content in _store_in_passwd_home():
        seen = tries(None, checkout, worktree, place.home, read=[store])
        read = str(seen["read"][str(store)]).encode()
        # A boolean, so that a failure's report shows no byte of the account's real key.
        leaked = content.strip() in read
        assert not leaked, f"{store} was read (sha256 {hashlib.sha256(read).hexdigest()[:12]})"


@USERS
def test_var_tmp_is_private_both_ways(place: Place, user: str | None) -> None:
    """Kills `/var/tmp` dropped from PRIVATE_TMP: the host's /var/tmp is not seen, and what the
    agent writes there stays in the sandbox."""
    if not Path("/var/tmp").is_dir():
        pytest.skip("this machine has no /var/tmp")
    name = f"loopctl-test-{uuid.uuid4().hex}"
    host_file, written = Path("/var/tmp") / f"{name}-host", Path("/var/tmp") / f"{name}-agent"
    checkout = make_repo(place.base / "checkout")
    worktree = worktree_of(checkout, place.base / "worktrees" / "t-1")
    if user is not None:
        give_to(user, place.base)
    try:
        host_file.write_text(SECRET + "\n")
        host_file.chmod(0o644)
        seen = tries(
            user, checkout, worktree, place.home,
            read=[host_file], exists=[host_file], write=[written],
        )  # fmt: skip
        assert seen["exists"][str(host_file)] is False
        assert SECRET not in str(seen["read"][str(host_file)])
        assert seen["write"][str(written)] == "written"  # its own private /var/tmp
        assert not written.exists()
    finally:
        host_file.unlink(missing_ok=True)
        written.unlink(missing_ok=True)


# --- the agent's tree ends with loopctl ---------------------------------------------------------

HOLDS_THE_FIFO = """
import os, subprocess, sys
fifo = os.open(sys.argv[1], os.O_WRONLY)
# A child in a session of its own holds the fifo too: it must end as well.
subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"], pass_fds=(fifo,),
                 start_new_session=True)
os.write(fifo, b"ready\\n")
import signal; signal.pause()
"""


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes()
        except OSError:
            continue
        parent = int(stat[stat.rfind(b")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = set[int](), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] != b"Z"


@USERS
def test_kill_9_of_loopctl_ends_the_agents_whole_tree(place: Place, user: str | None) -> None:
    """Kills `--die-with-parent` dropped: loopctl's side (confined_run.py, the process that
    started bwrap) is killed with SIGKILL, as a crash or the OOM killer would; the agent and
    the child it put in a session of its own both hold a fifo open, and the fifo reaches end
    of file only when every one of them is gone. Synchronised on the fifo's first line."""
    checkout = make_repo(place.base / "checkout")
    worktree = worktree_of(checkout, place.base / "worktrees" / "t-1")
    fifo = worktree / "held"
    os.mkfifo(fifo)
    if user is not None:
        give_to(user, place.base)
    argv = ["{python}", "-c", HOLDS_THE_FIFO, str(fifo)]
    command, env, who = driver(user, checkout, worktree, place.home, argv)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    loopctl = subprocess.Popen(
        command, env=env, cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, **who
    )
    tree: set[int] = set()
    try:
        assert _read_until(reader, b"ready\n", deadline=120) == b"ready\n", "the agent never ran"
        tree = descendants(loopctl.pid)
        assert tree, "the agent runs under loopctl"
        loopctl.kill()
        loopctl.wait(timeout=60)
        # Generous: only the disappearance is waited for, never the start.
        assert _read_until(reader, None, deadline=60) == b"", "the agent's tree outlived loopctl"
        ends = time.monotonic() + 60
        while any(alive(pid) for pid in tree) and time.monotonic() < ends:
            time.sleep(0.05)
        assert not [pid for pid in tree if alive(pid)]
    finally:
        os.close(reader)
        for pid in [loopctl.pid, *tree]:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        loopctl.wait(timeout=60)


def _read_until(fd: int, wanted: bytes | None, deadline: float) -> bytes:
    """Read `fd` until `wanted` has come (the bytes read then) or, for None, until end of file
    (b""); b"timeout" when `deadline` seconds pass first."""
    got = b""
    ends = time.monotonic() + deadline
    while time.monotonic() < ends:
        ready, _, _ = select.select([fd], [], [], max(0.0, ends - time.monotonic()))
        if not ready:
            break
        chunk = os.read(fd, 4096)
        if chunk == b"":
            return b"" if wanted is None else got  # every writer is gone
        got += chunk
        if wanted is not None and got == wanted:
            return got
    return b"timeout"
