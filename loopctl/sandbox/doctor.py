"""`loopctl doctor`'s live probe: a real sandboxed process tries each escape, one finding each."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from loopctl import process
from loopctl.egress import EgressPolicy
from loopctl.limits import Limits
from loopctl.sandbox.build import make_sandbox
from loopctl.sandbox.places import home_of
from loopctl.sandbox.policy import Sandbox


@dataclass(frozen=True, slots=True)
class ProbeFinding:
    """One line of `loopctl doctor`'s live probe."""

    name: str
    ok: bool
    detail: str


# The program the live probe runs confined: it tries each escape and prints one line for each.
_ESCAPE_PROBE = Path(__file__).parents[1].joinpath("escape_probe.py")


def live_probe(
    root: Path, env: Mapping[str, str], limits: Limits | None = None
) -> list[ProbeFinding]:
    """Start a real sandboxed process that tries to get out; report what it could and could not
    do. A scratch home holds a credential store (with a key) for it to unhide."""
    with tempfile.TemporaryDirectory(prefix="loopctl-doctor-") as scratch:
        worktree = Path(scratch) / "worktree"
        store = Path(scratch) / "home" / ".ssh"
        worktree.mkdir()
        store.mkdir(parents=True)
        (store / "id_probe").write_text("a key the probe must not see\n", encoding="utf-8")
        box = make_sandbox(root=root, worktree=worktree, limits=limits)
        probe_env = {**env, "HOME": str(store.parent)}
        return probe_findings(box, root, probe_env, home_of(env), store)


def probe_findings(
    box: Sandbox, root: Path, env: Mapping[str, str], home: Path, store: Path
) -> list[ProbeFinding]:
    """Run the escape probe in `box` (its worktree a scratch folder): one finding per escape;
    `home`'s credential stores and `store` must stay hidden."""
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
