"""The `Sandbox`: where one agent process may write and what it may read, and the bwrap command
line (or Seatbelt profile) that makes it so. Later bwrap mounts stack on earlier ones, so the
order of `bwrap_args` is the policy."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from loopctl import nofollow
from loopctl.egress import INSIDE_SOCKETS, EgressPolicy
from loopctl.egress_cassette import EgressTap
from loopctl.limits import Limits
from loopctl.sandbox import cli_state, host, visible
from loopctl.sandbox.git_admin import PINNED_EVEN_ABSENT, PROTECTED_IN_CHECKOUT, stand_in
from loopctl.sandbox.hidden import hidden_paths
from loopctl.sandbox.places import PRIVATE_TMP, expand, home_of, under_private_tmp, unique
from loopctl.sandbox.seatbelt import seatbelt_profile

# The uid inside the sandbox of a CLI that nests its own (Codex) when loopctl runs as root.
NESTED_UID = 1000
# The program inside a proxied sandbox that pipes its loopback ports to the egress proxy.
EGRESS_BRIDGE = Path(__file__).parents[1].joinpath("egress_bridge.py")


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
    # The turn's model cassette (loopctl.egress_cassette): what the proxy forwards is recorded
    # there, or (offline replay) answered from it. None: nothing is recorded.
    cassette: EgressTap | None = field(default=None, compare=False)
    # Every `host:port` asked of the proxy, allowed or refused: the turn's hosts (issue 31).
    asked: list[str] = field(default_factory=list, compare=False)

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
        home = home_of(env)
        args = [
            "--die-with-parent",
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            *host.HARDENING,
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
        declared = {Path(os.path.abspath(expand(p, env, home))) for p in self.readable}
        shown = [
            self.root,
            home,
            Path(executable).parent,
            *visible.program_files([executable, *args_after]),
            *visible.installed(executable, env),
            *self.extra_visible,
            *([Path(sys.executable).parent, EGRESS_BRIDGE.parent] if egress_dir else []),
            *(Path(p) for p in env.get("PATH", "").split(os.pathsep) if p.startswith("/")),
            *declared,
        ]
        for path in unique(shown):
            # A temp root itself (a PATH entry "/tmp", a program directly in /tmp, a HOME of
            # /tmp) is never bound whole: that would put the host's /tmp back over the private
            # one. Only `[sandbox] read` can ask for it, by name.
            if str(path) in PRIVATE_TMP and path not in declared:
                continue
            if not under_private_tmp(path):
                continue  # seen through `/` already (and perhaps not even ours to stat)
            # bwrap binds onto a link's target, which does not exist in the private /tmp: each
            # link on the way (the path itself, or a folder above it) is seen through its
            # folder, and the place it leads to is bound itself.
            for place in visible.through_links(path):
                if str(place) in PRIVATE_TMP and place not in declared:
                    continue
                # os.path.exists: a folder this account cannot enter is not there for it
                # (Path.exists raises PermissionError, and no agent would start).
                if under_private_tmp(place) and os.path.exists(place):
                    args += ["--ro-bind", str(place), str(place)]
        writable = self.writable_paths(env)  # first: it makes the places copies are bound at
        state = self.state_copies(env)
        # A writable place spelled through a link (a HOME under a linked /home, a linked
        # `~/.cache` holding the worktrees, a dotfiles `~/.claude`) is bound where it leads:
        # bwrap cannot walk an absolute link to a mount point. Under /tmp the folder holding
        # each link is shown first, read-only, so that the spelled path still leads there.
        for path in unique([*writable, *state]):  # the state places are writable places too
            for place in visible.through_links(path)[:-1]:
                shown_here = under_private_tmp(place) and str(place) not in PRIVATE_TMP
                if shown_here and os.path.exists(place):
                    args += ["--ro-bind", str(place), str(place)]
        for path in writable:
            if path not in state and path.exists():
                real = os.path.realpath(path)
                args += ["--bind", real, real]
        # After every other writable place: a declared `~/.cache` must not put the user's own
        # `~/.cache/opencode` back over its private copy.
        for path, copy in state.items():
            if copy is not None:
                args += ["--bind", str(copy), os.path.realpath(path)]
        for path in self.git_pinned:
            if path.name in PINNED_EVEN_ABSENT:
                stand_in(path)
            if path.exists():
                # The folders above resolved (a worktree under a linked `~/.cache`), the name
                # itself not: what is pinned is this file, as git in the worktree reads it.
                pinned = os.path.join(os.path.realpath(path.parent), path.name)
                args += ["--ro-bind", pinned, pinned]
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
        exposed = {expand(p, env, home) for p in self.readable}
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
        home = home_of(env)
        layer = [self.objects_layer / "upper"] if self.objects_layer is not None else []
        extra = [expand(p, env, home) for p in self.writable]
        return unique([self.worktree, *self.git_admin, *layer, *extra])

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
        home = home_of(env)
        state = cli_state.make_places(self.cli, env)
        extra = [expand(p, env, home) for p in self.writable]
        for path in extra:
            # A declared place that does not exist yet is a folder the agent will fill (a
            # package cache): made now, or it could not be bound writable.
            if not path.exists() and path.parent.is_dir():
                with contextlib.suppress(OSError):
                    path.mkdir()
        return unique([self.worktree, *self.git_admin, *state, *extra])

    def state_copies(self, env: Mapping[str, str]) -> dict[Path, Path | None]:
        """Each state place of the CLI, and the private copy bound there: refreshed now from
        the user's own (newer files win), None when there is none (no layer, nothing to copy,
        or a copy that cannot be made), so that the user's place stays read-only."""
        return cli_state.copies(self.cli, self.cli_layer, env)

    def hidden_paths(self, env: Mapping[str, str]) -> list[Path]:
        """Credential stores, browser profiles and histories under every home the agent could
        look in, and the host's sockets."""
        return hidden_paths(env)

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
