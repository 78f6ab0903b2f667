"""Confine every process loopctl starts on an agent's behalf (invariant 11, docs/INVARIANTS.md).

On Linux the confinement is bubblewrap: a new user, PID, IPC and UTS namespace; no capability
(as root too: bwrap otherwise leaves a root caller's sandbox every capability in its namespaces,
enough to unmount what hides a credential store or remount `/` writable); no further user
namespace (except for a CLI that nests its own sandbox); a session of its own (no TIOCSTI into
the caller's terminal); the whole file system read-only; the task's worktree (and what `git add`
needs of the repository) writable; a private /tmp; the user's credential stores and every
other process hidden; and, because the sandbox's PID 1 is bwrap's reaper, every process the
agent starts ends when the agent does, `setsid` or not. On macOS the same rules are written as
a Seatbelt profile for `sandbox-exec`.

The package builds command lines; it never decides policy from text an agent controls: every
path comes from the project's root, the worktree loopctl created, the definitions as loaded
before the turn, and the environment loopctl itself built. One job per module:

- `policy`: the `Sandbox` and its bwrap arguments (the order of mounts is the policy);
- `build`: `make_sandbox`, from what this machine offers and the paths loopctl chose;
- `host`: which bwrap, what it knows, whether a sandbox can start here; `harden_self`;
- `hidden`: credential stores, browser profiles, histories and host sockets no agent sees;
- `cli_state`: an agent CLI's private, writable copy of its own state (as its backend declares);
- `visible`: what the private /tmp must not hide (a program installed under /tmp);
- `git_admin`: a linked worktree's git paths; `places`: homes, `~`, `$NAME|default`;
- `seatbelt`: the macOS profile; `doctor`: `loopctl doctor`'s live escape probe.

The names below are the package's interface (`from loopctl import sandbox`; `sandbox.X`). A
test that replaces one of them must replace it in the module that uses it (`sandbox.host`,
`sandbox.visible`, …): a name re-exported here is a copy.
"""

from __future__ import annotations

from loopctl.sandbox.build import SandboxUnavailable, make_sandbox
from loopctl.sandbox.cli_state import private_copy
from loopctl.sandbox.doctor import ProbeFinding, live_probe, probe_findings
from loopctl.sandbox.git_admin import PINNED_EVEN_ABSENT, PROTECTED_IN_CHECKOUT, git_admin_paths
from loopctl.sandbox.hidden import CREDENTIAL_STORES, HOST_SOCKETS, PRIVATE_HISTORIES
from loopctl.sandbox.host import (
    HARDENING,
    bwrap_version,
    find_bwrap,
    harden_self,
    knows_disable_userns,
    probe,
)
from loopctl.sandbox.places import PRIVATE_TMP
from loopctl.sandbox.policy import EGRESS_BRIDGE, NESTED_UID, Sandbox
from loopctl.sandbox.seatbelt import seatbelt_profile

__all__ = [
    "CREDENTIAL_STORES",
    "EGRESS_BRIDGE",
    "HARDENING",
    "HOST_SOCKETS",
    "NESTED_UID",
    "PINNED_EVEN_ABSENT",
    "PRIVATE_HISTORIES",
    "PRIVATE_TMP",
    "PROTECTED_IN_CHECKOUT",
    "ProbeFinding",
    "Sandbox",
    "SandboxUnavailable",
    "bwrap_version",
    "find_bwrap",
    "git_admin_paths",
    "harden_self",
    "knows_disable_userns",
    "live_probe",
    "make_sandbox",
    "private_copy",
    "probe",
    "probe_findings",
    "seatbelt_profile",
]
