"""What the sandbox hides and holds, shown by attacks, for the one-line bugs other tests missed.

Each test runs a real program in the sandbox loopctl builds (tests/programs/confined_run.py, a
process of the account under test: the caller, root in CI, and `nobody`), with the checkout and
HOME under /tmp and outside it (support.outside_tmp) where that matters. The program tries what
an agent must not do: read a browser profile, a history, a linked credential store or another
home's keys; reach a host socket; attach the host's shared memory; see the host's /dev/shm or
its /tmp through a link; write the checkout's protected folders in place or the worktree's git
pointers; make a user namespace; keep a capability. Every verdict is read on the host. Each test
names the one-line mutants of loopctl/sandbox/ it kills; each was applied in a copy of the
package put first on PYTHONPATH (and on sys.path, for the tests that build the sandbox
in-process), and the test failed (issue 27).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.accounts import as_user, give_to, nobody_runtime, runtime
from support.confined import confined, last_json, tries
from support.outside_tmp import Place, outside_tmp, under_tmp
from support.repos import git, make_repo

from loopctl import sandbox

PY = sys.executable
PROGRAMS = Path(__file__).resolve().parents[1] / "programs"
USERS = pytest.mark.parametrize("user", [None, "nobody"], ids=["caller", "nobody"])
SECRET = "credential-material-2727"

pytestmark = pytest.mark.skipif(
    sandbox.probe()[0] != "bwrap", reason=f"no bwrap sandbox here: {sandbox.probe()[2]}"
)


def project(base: Path) -> tuple[Path, Path]:
    """A checkout under `base` and a linked worktree of it, as loopctl makes them."""
    checkout = make_repo(base / "checkout")
    worktree = base / "worktrees" / "t-1"
    git(checkout, "worktree", "add", "-q", "-b", "loop/t/1", str(worktree))
    return checkout, worktree


# --- browser profiles and histories ---------------------------------------------------------------

# Pinned here, independent of the code: an entry dropped from PRIVATE_HISTORIES (or changed) is
# still planted, and found readable. Folders hold a profile; the rest are history files.
KNOWN_HISTORIES = (
    *(".mozilla", ".librewolf", ".config/google-chrome", ".config/google-chrome-beta"),
    *(".config/google-chrome-unstable", ".config/chromium", ".config/BraveSoftware"),
    *(".config/microsoft-edge", ".config/vivaldi", ".config/opera", ".cache/mozilla"),
    *(".cache/google-chrome", ".cache/chromium", "snap/firefox", "snap/chromium", ".var/app"),
    *("Library/Application Support/Google/Chrome", "Library/Application Support/Chromium"),
    *("Library/Application Support/Firefox", "Library/Application Support/BraveSoftware"),
    *("Library/Application Support/Microsoft Edge", "Library/Application Support/Vivaldi"),
    *("Library/Safari", "Library/Cookies", ".bash_history", ".zsh_history", ".zhistory"),
    *(".histfile", ".sh_history", ".local/share/fish/fish_history", ".python_history"),
    *(".node_repl_history", ".psql_history", ".mysql_history", ".sqlite_history"),
    *(".rediscli_history", ".irb_history", ".lesshst", ".wget-hsts", ".viminfo"),
    ".local/state/nvim/shada",
)
_HISTORY_FILES = ("history", "hst", "hsts", "viminfo", "shada", "histfile")


def plant_history(home: Path, relative: str, secret: str) -> None:
    path = home / relative
    if relative.endswith(_HISTORY_FILES):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secret + "\n")
    else:  # a profile folder: the cookie sits below it
        (path / "Default").mkdir(parents=True, exist_ok=True)
        (path / "Default" / "Cookies").write_text(secret + "\n")


@USERS
def test_no_history_or_browser_profile_is_readable(place: Place, user: str | None) -> None:
    """Kills dropping or changing any one entry of PRIVATE_HISTORIES (`.zhistory`,
    `.librewolf`, `Library/Safari`, `.local/state/nvim/shada`, ...): each holds its own
    secret, none is read; a file beside them is."""
    wanted = sorted({*KNOWN_HISTORIES, *sandbox.PRIVATE_HISTORIES})
    planted = {relative: f"{SECRET}-{index}" for index, relative in enumerate(wanted)}
    for relative, secret in planted.items():
        plant_history(place.home, relative, secret)
    (place.home / "notes.txt").write_text("visible\n")
    checkout, worktree = project(place.base)
    if user is not None:
        give_to(user, place.base)

    read = [place.home / r for r in wanted] + [place.home / "notes.txt"]
    seen = tries(user, checkout, worktree, place.home, read=read)["read"]

    assert seen[str(place.home / "notes.txt")] == "visible\n"  # the hunt does read
    leaked = [r for r, secret in planted.items() if secret in seen[str(place.home / r)]]
    assert leaked == []


# --- the host's sockets, shared memory and /dev/shm -----------------------------------------------

# Pinned here: where a socket that hands out more than the agent should have lives (a folder
# gets a socket of the test's own below it).
SOCKET_PLACES = (
    "/run/user/1000/bus",
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/run/podman/podman.sock",
    "/run/containerd/containerd.sock",
)

REACH = r"""
import json, socket, sys
out = {}
for path in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        out[path] = "connected"
    except OSError as exc:
        out[path] = exc.strerror or str(exc)
    finally:
        s.close()
print(json.dumps(out))
"""

# Run as root in a mount namespace of its own (`unshare --mount`): fresh, empty /run and /var,
# where /var/run is either the usual link to /run or a folder of its own (then each socket place
# is a file of its own); nothing of the host's /run is touched. It listens at every place,
# then runs the reach test as the account under test, unconfined (the canary) and confined.
IN_NAMESPACE = r"""
import ctypes, json, os, socket, subprocess, sys
spec = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
for target in (b"/run", b"/var"):
    if libc.mount(b"tmpfs", target, b"tmpfs", 0, b"mode=755") != 0:
        raise OSError(ctypes.get_errno(), "mount tmpfs on " + target.decode())
if spec["var_run"] == "link":
    os.symlink("/run", "/var/run")  # as on most hosts: one docker socket, two names
else:
    os.mkdir("/var/run", 0o755)
listeners = []
for path in spec["sockets"]:
    if spec["var_run"] == "link" and path.startswith("/var/run/"):
        continue  # the same file as its /run name
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o777)
    listener.listen(8)
    listeners.append(listener)
who = spec["who"]
out = {}
for name, argv in (("canary", spec["canary"]), ("confined", spec["confined"])):
    done = subprocess.run(
        argv, capture_output=True, text=True, env=spec["env"], cwd="/", timeout=180, **who
    )
    out[name] = {"code": done.returncode, "stdout": done.stdout, "stderr": done.stderr}
print(json.dumps(out))
"""


@USERS
@pytest.mark.parametrize("var_run", ["folder", "link"])
def test_no_host_socket_is_reachable(user: str | None, var_run: str) -> None:
    """Kills dropping any entry of HOST_SOCKETS (`/run/user`, `/var/run/docker.sock`,
    `/run/docker.sock`, `/run/podman`, `/run/containerd`) or the line that adds them to the
    hidden paths: a read-only bind does not stop connect(), only hiding does. Each socket takes
    a connection from the host, by the same account, and none from the sandbox. Root only (a
    mount namespace of the test's own holds the sockets); the checkout under /tmp, since that
    namespace replaces /var. With /var/run a link to /run (most hosts), bwrap once refused to
    start at all: it cannot bind onto a path through an absolute link."""
    if os.geteuid() != 0 or not Path("/usr/bin/unshare").exists():
        pytest.skip("needs root and unshare(1) for a /run of the test's own")
    python, pythonpath = runtime(user)
    with under_tmp("sockets") as base:
        (base / "home").mkdir()
        checkout, worktree = project(base)
        if user is not None:
            give_to(user, base)
        agent_env = {"HOME": str(base / "home"), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
        run = {"root": str(checkout), "worktree": str(worktree), "env": agent_env}
        run["argv"] = [python, "-I", "-c", REACH, *SOCKET_PLACES]
        spec = {
            "sockets": SOCKET_PLACES,
            "var_run": var_run,
            "who": as_user(user),
            "env": {"PATH": "/usr/bin:/bin", "HOME": str(base / "home"), **pythonpath},
            "canary": [python, "-I", "-c", REACH, *SOCKET_PLACES],
            "confined": [python, str(PROGRAMS / "confined_run.py"), json.dumps(run)],
        }
        done = subprocess.run(
            ["/usr/bin/unshare", "--mount", "--propagation", "private", PY, "-I", "-c",
             IN_NAMESPACE, json.dumps(spec)],
            capture_output=True, text=True, timeout=300, check=False, cwd="/",
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads(done.stdout)
    canary = json.loads(out["canary"]["stdout"])
    assert canary == dict.fromkeys(SOCKET_PLACES, "connected"), out["canary"]
    assert out["confined"]["code"] == 0, out["confined"]
    seen = last_json(json.loads(out["confined"]["stdout"]))
    assert [path for path, got in seen.items() if got == "connected"] == []


_IPC_CREAT, _IPC_RMID = 0o1000, 0

SHM_HUNT = r"""
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
found, listed = [], []
with open("/proc/sysvipc/shm") as table:
    rows = [line.split() for line in table.read().splitlines()[1:]]
for row in rows:
    listed.append(row[0])
    address = libc.shmat(int(row[1]), None, 0o10000)  # SHM_RDONLY
    if address not in (None, ctypes.c_void_p(-1).value):
        found.append(ctypes.string_at(address, 64).split(b"\0")[0].decode("latin-1"))
print(json.dumps({"listed": listed, "found": found}))
"""


@contextlib.contextmanager
def host_shared_memory(text: str) -> Iterator[int]:
    """A System V shared memory segment of the host's, readable by every account, holding
    `text`; its key is yielded, and the segment removed afterwards."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    key = int.from_bytes(os.urandom(3), "big") + 0x27000000
    segment = libc.shmget(key, 4096, _IPC_CREAT | 0o666)
    if segment < 0:
        pytest.skip(f"no System V shared memory here: {os.strerror(ctypes.get_errno())}")
    try:
        address = libc.shmat(segment, None, 0)
        assert address not in (None, ctypes.c_void_p(-1).value)
        ctypes.memmove(address, text.encode() + b"\0", len(text) + 1)
        libc.shmdt(ctypes.c_void_p(address))
        yield key
    finally:
        libc.shmctl(segment, _IPC_RMID, None)


@USERS
def test_the_hosts_shared_memory_is_out_of_reach(place: Place, user: str | None) -> None:
    """Kills `--unshare-ipc` dropped: a System V segment of the host's (a database's buffers,
    another agent's scratch) is listed in /proc/sysvipc/shm and attachable by its id. The hunt
    runs unconfined first, as the same account, and finds it: so it can fail."""
    checkout, worktree = project(place.base)
    if user is not None:
        give_to(user, place.base)
    text = f"{SECRET}-shm-{secrets.token_hex(4)}"
    with host_shared_memory(text) as key:
        python, pythonpath = runtime(user)
        canary = subprocess.run(
            [python, "-c", SHM_HUNT], capture_output=True, text=True, check=True,
            env={"PATH": "/usr/bin:/bin", **pythonpath}, cwd="/", **as_user(user),
        )  # fmt: skip
        assert text in json.loads(canary.stdout)["found"]
        seen = last_json(
            confined(user, checkout, worktree, place.home, ["{python}", "-c", SHM_HUNT])
        )
    assert text not in seen["found"]
    assert str(key) not in seen["listed"]


@USERS
def test_the_hosts_dev_shm_is_private_both_ways(place: Place, user: str | None) -> None:
    """Kills `"--dev", "/dev"` dropped from the bwrap arguments: the host's /dev (ro-bound with
    `/`) then shows the host's /dev/shm, where processes keep POSIX shared memory and
    semaphores. Neither a host file there is seen, nor does the agent's own land on the host."""
    shm = Path("/dev/shm")
    if not shm.is_dir():
        pytest.skip("this machine has no /dev/shm")
    checkout, worktree = project(place.base)
    if user is not None:
        give_to(user, place.base)
    name = f"loopctl-test-{secrets.token_hex(6)}"
    host_file, written = shm / f"{name}-host", shm / f"{name}-agent"
    try:
        host_file.write_text(SECRET + "\n")
        host_file.chmod(0o644)
        seen = tries(
            user, checkout, worktree, place.home,
            read=[host_file], exists=[host_file], write=[written],
        )  # fmt: skip
        assert seen["exists"][str(host_file)] is False
        assert SECRET not in str(seen["read"][str(host_file)])
        assert seen["write"][str(written)] == "written"  # its own private /dev/shm
        assert not written.exists()
    finally:
        host_file.unlink(missing_ok=True)
        written.unlink(missing_ok=True)


def test_the_hosts_cgroup_paths_are_not_shown() -> None:
    """Kills `--unshare-cgroup-try` dropped: /proc/self/cgroup then names the host's control
    groups (a container's id, a user's slice). Inside, every line names its own root."""
    own = Path("/proc/self/cgroup").read_text().splitlines()
    if all(line.endswith(":/") for line in own):
        pytest.skip("this process sits in the root of every control group: nothing to hide")
    with tempfile.TemporaryDirectory() as scratch:
        checkout, worktree = project(Path(scratch))
        code = "print(open('/proc/self/cgroup').read())"
        ran = confined(None, checkout, worktree, Path(scratch), ["{python}", "-c", code])
    assert ran["code"] == 0, ran
    inside = [line for line in ran["stdout"].splitlines() if line.strip()]
    assert inside, ran
    assert [line for line in inside if not line.endswith(":/")] == []


def test_an_account_without_a_passwd_entry_still_gets_a_sandbox() -> None:
    """Kills `KeyError` dropped from what `_passwd_home` passes over: containers often run an
    arbitrary uid that /etc/passwd does not know (OpenShift, `docker run --user`), and loopctl
    then made no sandbox at all (pwd.getpwuid raises KeyError)."""
    import pwd

    if os.geteuid() != 0 or nobody_runtime() is None:
        pytest.skip("needs root to run as a uid without a passwd entry")
    uid = next(u for u in range(54321, 54421) if not _known_uid(u, pwd))
    python, pythonpath = runtime("nobody")
    with under_tmp("no-passwd") as base:
        (base / "home").mkdir()
        checkout, worktree = project(base)
        for path in [base, *base.rglob("*")]:
            os.chown(path, uid, uid, follow_symlinks=False)
        agent_env = {"HOME": str(base / "home"), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
        spec = {"root": str(checkout), "worktree": str(worktree), "env": agent_env}
        spec["argv"] = [python, "-c", "print('ran')"]
        env = {"PATH": "/usr/bin:/bin", "HOME": str(base / "home"), **pythonpath}
        done = subprocess.run(
            [python, str(PROGRAMS / "confined_run.py"), json.dumps(spec)],
            env=env, cwd="/", capture_output=True, text=True, timeout=180, check=False,
            stdin=subprocess.DEVNULL, user=uid, group=uid, extra_groups=[],
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    ran = json.loads(done.stdout)
    assert (ran["code"], ran["stdout"].strip()) == (0, "ran"), ran


def _known_uid(uid: int, pwd: Any) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


# --- other homes, links to /tmp, linked stores ----------------------------------------------------


@USERS
def test_a_store_in_loopctls_own_home_stays_hidden_when_the_agents_home_differs(
    user: str | None,
) -> None:
    """Kills `Path.home()` dropped from the homes `hidden_paths` covers: loopctl's own HOME
    (`sudo -E`, a unit's environment) holds keys too, and the agent's HOME points elsewhere.
    Outside /tmp only: under it the private /tmp hides loopctl's home whole."""
    with outside_tmp("own-home") as base:
        own_home, home = base / "loopctl-home", base / "home"
        home.mkdir()
        stores = {".ssh/id_ed25519": f"{SECRET}-ssh", ".docker/config.json": f"{SECRET}-docker"}
        for relative, secret in stores.items():
            (own_home / relative).parent.mkdir(parents=True, exist_ok=True)
            (own_home / relative).write_text(secret + "\n")
        (own_home / "notes.txt").write_text("visible\n")
        checkout, worktree = project(base)
        if user is not None:
            give_to(user, base)
        paths = {"read": [str(own_home / r) for r in [*stores, "notes.txt"]]}
        argv = ["{python}", str(PROGRAMS / "tries_paths.py"), json.dumps(paths)]

        ran = confined(user, checkout, worktree, home, argv, loopctl_home=own_home)

    seen = last_json(ran)["read"]
    assert seen[str(own_home / "notes.txt")] == "visible\n"  # the hunt does read
    assert [r for r, secret in stores.items() if secret in seen[str(own_home / r)]] == []


@pytest.mark.parametrize("how", ["path-entry", "home"])
def test_a_link_to_tmp_never_reopens_the_hosts_tmp(how: str) -> None:
    """Kills the guard that never binds a temp root itself turned off where it is checked for
    each place bound (`if str(place) in PRIVATE_TMP and place not in declared`): a PATH entry
    or a HOME under /tmp that is a link to /tmp itself would bind the whole host /tmp back."""
    with (
        tempfile.TemporaryDirectory(dir="/tmp") as scratch,
        tempfile.NamedTemporaryFile("w", dir="/tmp", prefix="host-secret-") as host_file,
    ):
        host_file.write(SECRET + "\n")
        host_file.flush()
        base = Path(scratch)
        link = base / "link"
        link.symlink_to("/tmp")
        checkout, worktree = project(base)
        home, path = (base / "home", f"{link}:/usr/bin:/bin")
        if how == "home":
            home, path = link, "/usr/bin:/bin"
        else:
            home.mkdir()
        code = f"import os; print(os.path.exists({host_file.name!r}))"
        ran = confined(None, checkout, worktree, home, ["{python}", "-c", code], path=path)
    assert ran["code"] == 0, ran
    assert ran["stdout"].split() == ["False"]


LINKED = {
    ".ssh": "dotfiles/ssh",  # a folder
    ".aws": "dotfiles/aws",
    ".netrc": "dotfiles/netrc",  # a file
    ".docker/config.json": "../dotfiles/docker.json",
    ".kube": "dotfiles/no-such-folder",  # dangling
}


@USERS
def test_a_linked_credential_store_hides_what_it_leads_to(place: Place, user: str | None) -> None:
    """Stores kept in a dotfiles repository and linked from HOME (`~/.ssh -> dotfiles/ssh`):
    the agent starts (a bind onto a linked folder, or a dangling link, once stopped bwrap: no
    agent could run at all) and reads the key neither through the link nor at its target."""
    dotfiles = place.home / "dotfiles"
    targets = {
        "ssh/id_ed25519": f"{SECRET}-ssh",
        "aws/credentials": f"{SECRET}-aws",
        "netrc": f"{SECRET}-netrc",
        "docker.json": f"{SECRET}-docker",
    }
    for relative, secret in targets.items():
        (dotfiles / relative).parent.mkdir(parents=True, exist_ok=True)
        (dotfiles / relative).write_text(secret + "\n")
    for store, target in LINKED.items():
        (place.home / store).parent.mkdir(parents=True, exist_ok=True)
        (place.home / store).symlink_to(target)
    checkout, worktree = project(place.base)
    if user is not None:
        give_to(user, place.base)
    read = [
        *(dotfiles / relative for relative in targets),
        place.home / ".ssh" / "id_ed25519",
        place.home / ".aws" / "credentials",
        place.home / ".netrc",
        place.home / ".docker" / "config.json",
    ]

    seen = tries(user, checkout, worktree, place.home, read=read)["read"]

    leaked = [path for path, text in seen.items() if SECRET in str(text)]
    assert leaked == []


# --- working in place -----------------------------------------------------------------------------

# Pinned here: the checkout's folders an agent working in place must never write.
KNOWN_PROTECTED = (".loop", "agents", "skills", ".claude", ".codex", ".agents", ".git")


@USERS
def test_in_place_every_protected_folder_stays_as_it_was(place: Place, user: str | None) -> None:
    """Kills dropping `skills`, `.claude`, `.codex`, `.agents` (or any other entry) from
    PROTECTED_IN_CHECKOUT: in place the checkout is bound writable, and only the read-only
    bind of each folder keeps a skill, a CLI's project settings or hooks as they are."""
    checkout = make_repo(place.base / "checkout")
    names = sorted({*KNOWN_PROTECTED, *sandbox.PROTECTED_IN_CHECKOUT})
    victims, planted = [], []
    for name in names:
        folder = checkout / name
        folder.mkdir(exist_ok=True)
        victim = folder / "kept.md"
        if name != ".git":
            victim.write_text(f"the user's {name}\n")
        else:
            victim = folder / "HEAD"
        victims.append(victim)
        planted.append(folder / "planted.md")
    before = {victim: victim.read_bytes() for victim in victims}
    if user is not None:
        give_to(user, place.base)

    seen = tries(
        user, checkout, checkout, place.home,
        write=[*victims, *planted, checkout / "work.py"], remove=victims,
    )  # fmt: skip

    assert seen["write"][str(checkout / "work.py")] == "written"
    assert [str(v) for v in victims if before[v] != v.read_bytes()] == []
    assert [str(p) for p in planted if p.exists()] == []
    assert [v for v, got in seen["remove"].items() if got == "removed"] == []


@pytest.mark.parametrize("under", ["tmp", "outside-tmp"])
def test_a_path_entry_the_account_cannot_enter_does_not_stop_the_agent(under: str) -> None:
    """A PATH entry in a folder the account cannot enter (root's own tools, for an agent run as
    `nobody`): under /tmp it was looked at with Path.exists, which raised PermissionError, and
    no agent started at all. It is passed over (the private /tmp hides it anyway); outside
    /tmp it is never looked at."""
    if os.geteuid() != 0 or nobody_runtime() is None:
        pytest.skip("needs root and the account `nobody`")
    made = under_tmp("closed") if under == "tmp" else outside_tmp("closed")
    with made as base:
        closed = base / "roots-own"
        (closed / "bin").mkdir(parents=True)
        (base / "home").mkdir()
        checkout, worktree = project(base)
        give_to("nobody", base)
        os.chown(closed, 0, 0)
        closed.chmod(0o700)
        code = "print('ran')"
        path = f"{closed / 'bin'}:/usr/bin:/bin"
        ran = confined(
            "nobody", checkout, worktree, base / "home", ["{python}", "-c", code], path=path
        )
    assert ran["code"] == 0, ran
    assert ran["stdout"].strip() == "ran"


# --- the worktree's git pointers ------------------------------------------------------------------


@USERS
def test_the_worktrees_git_pointers_stay_as_they_are(place: Place, user: str | None) -> None:
    """Kills any of the worktree's `.git` file, the admin folder's `gitdir`, `commondir` or
    `config.worktree` dropped from the pinned files: rewritten, they point loopctl's own git
    at a repository the agent planted. The rest of the admin folder stays writable (the
    index, for `git add`)."""
    checkout, worktree = project(place.base)
    admin = Path(git(worktree, "rev-parse", "--absolute-git-dir").strip())
    pointers = [worktree / ".git", admin / "gitdir", admin / "commondir"]
    before = {p: p.read_bytes() for p in pointers}
    planted = admin / "config.worktree"
    if user is not None:
        give_to(user, place.base)

    seen = tries(
        user, checkout, worktree, place.home,
        write=[*pointers, planted, admin / "index"], remove=pointers,
    )  # fmt: skip

    assert seen["write"][str(admin / "index")] == "written"  # the admin folder is writable
    assert [str(p) for p in pointers if p.read_bytes() != before[p]] == []
    assert seen["write"][str(planted)] != "written"
    assert not planted.exists() or planted.read_bytes() == b""
    assert [p for p, got in seen["remove"].items() if got == "removed"] == []


def test_an_object_layer_where_the_agent_writes_is_refused(tmp_path: Path) -> None:
    """Kills the refusal of an object layer inside the worktree or its admin folder turned off:
    loopctl makes and cleans that layer unconfined after the turn, and would follow the links
    the agent planted there."""
    checkout, worktree = project(tmp_path)
    admin = Path(git(worktree, "rev-parse", "--absolute-git-dir").strip())
    for inside in (worktree / ".objects", admin / "objects-layer"):
        with pytest.raises(ValueError, match="inside writable"):
            sandbox.make_sandbox(root=checkout, worktree=worktree, objects_layer=inside)
    box = sandbox.make_sandbox(root=checkout, worktree=worktree, objects_layer=tmp_path / "l")
    assert box.objects_layer == tmp_path / "l"


# --- what the agent is told -----------------------------------------------------------------------


def test_the_agent_is_told_it_is_confined_and_leads_a_session_of_its_own(tmp_path: Path) -> None:
    """Kills LOOPCTL_SANDBOX or TMPDIR dropped from the agent's environment (tools keep temp
    files where TMPDIR says, and the host's is hidden), and `--new-session` dropped: the
    agent's session leader is then loopctl's, outside the sandbox's PID namespace (sid 0
    inside), and TIOCSTI could push keystrokes into the terminal loopctl runs in."""
    checkout, worktree = project(tmp_path)
    code = (
        "import json, os; names = ('LOOPCTL_SANDBOX', 'TMPDIR');"
        " print(json.dumps([*(os.environ.get(n) for n in names), os.getcwd(), os.getsid(0)]))"
    )
    seen = last_json(confined(None, checkout, worktree, tmp_path, ["{python}", "-c", code]))
    assert seen[:3] == ["bwrap", "/tmp", str(worktree)]
    assert seen[3] != 0  # its session's leader is inside the sandbox


@USERS
def test_the_agent_holds_no_capability(place: Place, user: str | None) -> None:
    """Kills `--cap-drop ALL` dropped: bwrap leaves a root caller's sandbox every capability in
    its namespaces (enough to unmount what hides a store); the agent's sets must be empty."""
    checkout, worktree = project(place.base)
    if user is not None:
        give_to(user, place.base)
    code = (
        "import json; print(json.dumps({l.split(':')[0]: l.split()[1]"
        " for l in open('/proc/self/status') if l.startswith(('CapPrm', 'CapEff', 'CapBnd'))}))"
    )
    seen = last_json(confined(user, checkout, worktree, place.home, ["{python}", "-c", code]))
    assert seen == dict.fromkeys(("CapPrm", "CapEff", "CapBnd"), "0" * 16)


USERNS = (
    "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True);"
    " print(libc.unshare(0x10000000), os.strerror(ctypes.get_errno()))"  # CLONE_NEWUSER
)


def test_without_the_syscall_filter_the_agent_still_makes_no_user_namespace(
    tmp_path: Path,
) -> None:
    """Kills `--disable-userns` left out (its guard turned off, or the version it came with
    moved past this bwrap): where libseccomp is missing the filter is not loaded, and then
    only `--disable-userns` keeps the agent from a user namespace of its own, where it holds
    every capability again."""
    import dataclasses

    from loopctl import process

    checkout, worktree = project(tmp_path)
    box = sandbox.make_sandbox(root=checkout, worktree=worktree)
    box = dataclasses.replace(box, syscall_filter=False)
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    done = process.run([PY, "-I", "-c", USERNS], cwd=worktree, env=env, timeout=120, sandbox=box)
    assert done.ok, done.output_tail()
    result, _why = done.stdout_tail.split(maxsplit=1)
    assert result == "-1", done.stdout_tail


def test_as_root_a_cli_that_nests_its_own_sandbox_can_start_it(tmp_path: Path) -> None:
    """Kills the uid mapping for a nesting CLI (Codex) dropped when loopctl runs as root: the
    nested bwrap then finds itself uid 0 without capabilities and cannot make its namespaces,
    so every command Codex runs fails."""
    if os.geteuid() != 0:
        pytest.skip("the mapping is made only when loopctl runs as root")
    from loopctl import process

    bwrap = sandbox.find_bwrap()
    assert bwrap is not None
    checkout, worktree = project(tmp_path)
    box = sandbox.make_sandbox(root=checkout, worktree=worktree, cli="codex")
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    nested = [bwrap, "--ro-bind", "/", "/", "--unshare-pid", "--", "/bin/true"]
    done = process.run(nested, cwd=worktree, env=env, timeout=120, sandbox=box)
    assert done.ok, done.output_tail()


# --- a program installed under /tmp ---------------------------------------------------------------


def test_a_package_with_its_manifest_at_the_top_runs_from_tmp() -> None:
    """Kills `package.json` dropped from _INSTALL_MARKERS: a package installed under a HOME in
    /tmp (its launcher in `bin/`, linked from PATH, its code in `lib/`) is put back whole."""
    with tempfile.TemporaryDirectory(dir="/tmp") as scratch:
        base = Path(scratch)
        package = base / "opt" / "tool"  # outside HOME, which is put back anyway
        (package / "bin").mkdir(parents=True)
        (package / "lib").mkdir()
        (package / "package.json").write_text('{"name": "tool"}\n')
        (package / "lib" / "words.txt").write_text("the package's own code\n")
        launcher = package / "bin" / "tool"
        launcher.write_text(
            f"#!{PY}\nimport os\nhere = os.path.dirname(os.path.realpath(__file__))\n"
            "print(open(os.path.join(here, '..', 'lib', 'words.txt')).read())\n"
        )
        launcher.chmod(0o755)
        (base / "home" / "bin").mkdir(parents=True)
        (base / "home" / "bin" / "tool").symlink_to(launcher)
        checkout, worktree = project(base)
        path = f"{base / 'home' / 'bin'}:/usr/bin:/bin"
        ran = confined(None, checkout, worktree, base / "home", ["tool"], path=path)
    assert ran["code"] == 0, ran
    assert ran["stdout"].strip() == "the package's own code"


def test_a_linked_program_folder_under_tmp_runs_through_its_link() -> None:
    """Kills the link's own folder left out of what is put back (`if str(path.parent) not in
    PRIVATE_TMP` turned off): a PATH entry under /tmp that is a link to a versioned install
    (`tools/bin -> ../opt/tool-2.1/bin`) is then missing inside, and the program run through
    it cannot start."""
    with tempfile.TemporaryDirectory(dir="/tmp") as scratch:
        base = Path(scratch)
        install = base / "opt" / "tool-2.1" / "bin"
        install.mkdir(parents=True)
        (install / "tool").write_text(f"#!{PY}\nprint('tool ran')\n")
        (install / "tool").chmod(0o755)
        (base / "tools").mkdir()
        (base / "tools" / "bin").symlink_to("../opt/tool-2.1/bin")
        (base / "home").mkdir()
        checkout, worktree = project(base)
        path = f"{base / 'tools' / 'bin'}:/usr/bin:/bin"
        ran = confined(None, checkout, worktree, base / "home", ["tool"], path=path)
    assert ran["code"] == 0, ran
    assert ran["stdout"].strip() == "tool ran"


# --- the user's own CLI sessions ------------------------------------------------------------------

# Pinned here: where each CLI keeps the user's own transcripts and logs, which its private copy
# in the sandbox never receives (the state folder, as the CLI finds it without XDG variables).
CLI_TRANSCRIPTS = {
    "claude": (".claude", ("projects", "file-history", "shell-snapshots", "todos", "debug")),
    "codex": (".codex", ("sessions", "archived_sessions", "log", "history.jsonl")),
    "opencode": (".local/share/opencode", ("storage", "snapshot", "log")),
    "goose": (".local/share/goose", ("sessions", "logs")),
}

READ_STATE = r"""
import json, os, sys
found = {}
for top, _folders, files in os.walk(sys.argv[1]):
    for name in files:
        path = os.path.join(top, name)
        try:
            with open(path, encoding="utf-8") as opened:
                found[os.path.relpath(path, sys.argv[1])] = opened.read()
        except OSError as exc:
            found[os.path.relpath(path, sys.argv[1])] = exc.strerror
print(json.dumps(found))
"""


@pytest.mark.parametrize("cli", sorted(CLI_TRANSCRIPTS))
def test_the_users_own_cli_transcripts_never_reach_the_private_copy(place: Place, cli: str) -> None:
    """Kills dropping any entry of CLI_HISTORY (`projects`, `history.jsonl`, `storage`, ...):
    the private copy of a CLI's state, which the agent reads and writes, holds the user's
    settings but none of the user's own sessions, where pasted keys and private code linger."""
    from loopctl import process

    folder, names = CLI_TRANSCRIPTS[cli]
    state = place.home / folder
    state.mkdir(parents=True)
    (state / "settings.json").write_text('{"theme": "the user\'s"}\n')
    for index, name in enumerate(names):
        secret = f"{SECRET}-{cli}-{index}\n"
        if "." in name:  # a file at the top (codex's history.jsonl)
            (state / name).write_text(secret)
        else:
            (state / name / "past").mkdir(parents=True)
            (state / name / "past" / "session.jsonl").write_text(secret)
    checkout, worktree = project(place.base)
    layer = place.base / "state-layer"
    box = sandbox.make_sandbox(root=checkout, worktree=worktree, cli=cli, cli_layer=layer)
    env = {"HOME": str(place.home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}

    done = process.run(
        [PY, "-I", "-c", READ_STATE, str(state)], cwd=worktree, env=env, timeout=120, sandbox=box
    )

    assert done.ok, done.output_tail()
    seen = json.loads(done.stdout_tail.strip().splitlines()[-1])
    assert seen.get("settings.json") == '{"theme": "the user\'s"}\n'  # the copy is what it reads
    assert [path for path, text in seen.items() if SECRET in text] == []


def test_the_private_copy_of_a_cli_state_is_the_callers_alone(place: Place) -> None:
    """Kills the private layer made with another mode than 0700: it holds copies of the user's
    CLI state (`~/.claude.json` is world-readable in many homes, and holds MCP servers'
    tokens), and the copy of the home above it keeps the home's own mode; another account
    on the machine must not read them there."""
    if os.geteuid() != 0 or nobody_runtime() is None:
        pytest.skip("needs root and the account `nobody` to try the other side")
    from loopctl import process

    (place.home / ".claude").mkdir()
    (place.home / ".claude.json").write_text(f'{{"mcpServers": {{"token": "{SECRET}"}}}}\n')
    (place.home / ".claude.json").chmod(0o644)
    checkout, worktree = project(place.base)
    (place.base / "layers").mkdir(mode=0o755)
    layer = place.base / "layers" / "maker"
    box = sandbox.make_sandbox(root=checkout, worktree=worktree, cli="claude", cli_layer=layer)
    env = {"HOME": str(place.home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    done = process.run([PY, "-c", "pass"], cwd=worktree, env=env, timeout=120, sandbox=box)
    assert done.ok, done.output_tail()
    copies = [p for p in layer.rglob("*") if p.is_file() and SECRET in p.read_text()]
    assert copies, "the layer holds the copy: the attack below has something to find"
    python, _ = runtime("nobody")
    code = (
        "import sys\nfor p in sys.argv[1:]:\n    try:\n        print(open(p).read())\n"
        "    except OSError:\n        pass\n"
    )
    peek = subprocess.run(
        [python, "-I", "-c", code, *map(str, copies)], capture_output=True, text=True,
        check=False, cwd="/", env={"PATH": "/usr/bin:/bin"}, **as_user("nobody"),
    )  # fmt: skip
    assert SECRET not in peek.stdout


# --- macOS ----------------------------------------------------------------------------------------


def test_the_seatbelt_profile_is_the_whole_rule_set(tmp_path: Path) -> None:
    """sandbox-exec cannot run here, so its profile is pinned whole: every rule in its order
    (deny by default, then what is allowed, then what is denied again). Kills any line of the
    profile dropped or changed, which test_sandbox_rules' spot checks let through."""
    root, home = tmp_path / "repo", tmp_path / "home"
    objects, pinned = tmp_path / "objects", root / ".git"
    box = sandbox.Sandbox(
        "seatbelt", "/usr/bin/sandbox-exec", root, root,
        git_pinned=(pinned,), git_objects=objects, readable=("~/.aws",),
    )  # fmt: skip
    env = {"HOME": str(home)}
    hidden = [str(p) for p in box.hidden_paths(env) if p != home / ".aws"]
    assert str(home / ".ssh") in hidden
    assert "/run/user" in hidden
    expected = [
        "(version 1)",
        "(deny default)",
        "(allow process-fork)",
        "(allow process-exec)",
        "(allow signal (target same-sandbox))",
        "(allow sysctl-read)",
        "(allow mach-lookup)",
        "(allow ipc-posix-shm)",
        "(allow file-read*)",
        '(allow file-write* (literal "/dev/null") (literal "/dev/tty"))',
        '(allow file-write* (subpath "/private/tmp") (subpath "/private/var/folders"))',
        f'(allow file-write* (subpath "{root}"))',
        f'(allow file-write* (subpath "{objects}"))',
        *(f'(deny file-read* file-write* (subpath "{path}"))' for path in hidden),
        *(f'(deny file-write* (subpath "{root / name}"))' for name in KNOWN_PROTECTED),
        f'(deny file-write* (literal "{pinned}"))',
        "(deny network*)",
        '(allow network* (remote ip "localhost:*"))',
        '(allow network* (local ip "localhost:*"))',
    ]
    assert sandbox.seatbelt_profile(box, env).splitlines() == expected
