"""`loopctl doctor`: what the agent sandbox can do on this machine, proven by a live probe."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from loopctl.cli.boundary import boundary
from loopctl.cli.options import JsonFlag


def doctor(json_out: JsonFlag = False) -> None:
    """Show the sandbox agents run in here: mechanism, what is hidden and writable, which limits
    hold, and a live probe that tries to get out; and which source tree a Node check in a task's
    worktree imports.

    Exits 1 when no sandbox can be set up (and says how to fix it), or the probe finds a hole.
    """
    from loopctl import limits, node_links, sandbox, syscall_filter
    from loopctl.checks.import_roots import checkout_note
    from loopctl.definitions.config import load_config
    from loopctl.definitions.source import Problems
    from loopctl.errors import LoopctlError
    from loopctl.paths import ProjectPaths, find_repo_root
    from loopctl.secrets import build_env

    root = find_repo_root()
    mode = load_config(ProjectPaths(root).config, Problems()).sandbox.value
    mechanism, program, why = sandbox.probe()
    env = build_env(allow=())
    report: dict[str, object] = {"mode": mode, "mechanism": mechanism, "program": program}
    findings: list[sandbox.ProbeFinding] = []
    if mechanism is not None:
        box = sandbox.make_sandbox(root=root, worktree=root)
        report.update(box.describe(env))
        # Described for the checkout itself; a task's sandbox writes its own worktree instead.
        report["writable"] = [
            "each task's worktree, its git admin folder and the object store",
            *[entry for entry in report["writable"] if entry != str(root)],  # type: ignore[attr-defined]
        ]
        findings = sandbox.live_probe(root, env, limits.Limits())
        missing = syscall_filter.unavailable() if mechanism == "bwrap" else "not bwrap"
        report["syscall_filter"] = {"loaded": not missing, "why_not": missing}
    else:
        report["problem"] = why
    report["probe"] = [{"name": f.name, "ok": f.ok, "detail": f.detail} for f in findings]
    holds = limits.holds(limits.Limits())
    report["limits"] = [
        {"name": h.name, "default": h.value, "held": h.held, "how": h.how} for h in holds
    ]
    # Which source tree a check in a task's worktree imports, where the checkout decides it.
    python = checkout_note(root, os.environ)
    node = node_links.describe(root, setup=False)
    imports = [line for line in (python, node) if line]
    if imports:
        report["imports"] = imports
    egress = _egress(root)
    report["egress"] = egress
    if json_out:
        from loopctl.cli.render import print_json

        print_json("doctor", report)
    else:
        print(f"sandbox mode: {mode}" + (" (agents run UNCONFINED)" if mode == "off" else ""))
        if mechanism is None:
            print(f"mechanism:    none — {why}")
        else:
            print(f"mechanism:    {mechanism} ({program})")
            network = report.get("network")
            shown = network if isinstance(network, str) else ("on" if network else "off")
            print(f"network:      {shown} (per agent below: [sandbox] network and hosts)")
            if mechanism == "bwrap":
                print(f"seccomp:      {_filter_line(syscall_filter.unavailable())}")
            for key in ("writable", "read_only", "hidden"):
                values = report.get(key)
                if isinstance(values, list):
                    print(f"{key.replace('_', '-')}:")
                    for value in values:
                        print(f"  {value}")
            print("limits (defaults; per agent in [sandbox]):")
            for hold in holds:
                state = "held    " if hold.held else "NOT HELD"
                print(f"  {state} {hold.name} {hold.value}: {hold.how}")
            print("live probe:")
            for finding in findings:
                print(f"  {'ok  ' if finding.ok else 'FAIL'} {finding.name}: {finding.detail}")
        if imports:
            print("imports:")
            for line in imports:
                print(f"  {line}")
        _print_egress(egress)
    if mechanism is None:
        raise LoopctlError(f"no sandbox for agents: {why}")
    if not findings or not all(f.ok for f in findings):
        raise LoopctlError("the sandbox probe found a hole: see above")
    raise typer.Exit(0)


def _egress(root: Path) -> dict[str, object]:
    """Each agent's network and lent secrets (issue 25); a broken definition is said, not
    fatal: doctor is what one runs when something is wrong."""
    from loopctl.definitions import load_project
    from loopctl.engine.egress_policy import project_egress
    from loopctl.errors import LoopctlError

    try:
        return project_egress(load_project(root))
    except LoopctlError as exc:
        return {"problem": str(exc)}


def _print_egress(egress: dict[str, object]) -> None:
    from loopctl.engine.egress_policy import egress_lines

    if "problem" in egress:
        print(f"agents' network: not shown ({egress['problem']})")
        return
    agents = egress.get("agents")
    if isinstance(agents, dict) and agents:
        print("agents' network (per agent: [sandbox] network, hosts; [env.secrets]):")
        for name, summary in agents.items():
            print(f"  {name} ({summary.get('backend')}):")
            for line in egress_lines(summary, "    "):
                print(line)
    checks = egress.get("checks")
    if isinstance(checks, dict) and checks:
        print("checks' network (per loop: [checker] network):")
        for name, summary in checks.items():
            lines = egress_lines(summary)
            print(f"  {name}: {lines[0].split(':', 1)[1].strip()}")
            for line in lines[1:]:
                print(f"    {line}")


def _filter_line(missing: str) -> str:
    if missing:
        return f"NO FILTER: {missing}; agents run without it"
    return "loaded (mount, unshare, ptrace attach, keyctl, bpf, TIOCSTI... refused: EPERM)"


def register(app: typer.Typer) -> None:
    app.command()(boundary(doctor))
