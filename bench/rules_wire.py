"""The loop's rules on the wire, across many attempts of the real CLIs (issue 31, item 2).

Run: python bench/rules_wire.py [--attempts 50]

Each run is `loopctl goal "tests green"` with a real CLI as maker, beside the scripted model
server (tests/support/model_server.py, sealed in a loopback-only network namespace as root),
which logs every request the CLI sends. Three kinds of run, in turn, until `--attempts` maker
attempts have run:

- Claude Code, `compact_twice_then_fix`: the server reports a context past Claude Code's
  compaction window until the CLI has compacted twice (one attempt, two real compactions);
- Claude Code, `fix_on_second_attempt`: two attempts, the second resuming the first's session;
- Codex, `fix_on_second_attempt`: two attempts (Codex runs no untrusted hooks in `exec`; its
  rules travel in the prompt).

Counted from the server's log, not from loopctl's journal: the requests that can lead to a tool
call (they declare tools), those carrying the current rules marker (`loopctl-rules v1
sha256:…`, the hash the journal's `rules` note holds for the attempt), and the compactions.
The figure is the share of tool-capable requests without the marker: the goal is 0.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(ROOT / "tests"))  # `support`, the real-CLI harness the tests use
from results import Row, print_rows  # noqa: E402
from scratch_home import isolate  # noqa: E402

STREAM = 'args = ["--output-format", "stream-json", "--verbose"]\nresume = true\n'
CODEX_PRICES = '\n[prices."gpt-5.5"]\ninput = 3.0\noutput = 15.0\n'
KINDS = (
    ("claude", "compact_twice_then_fix"),
    ("claude", "fix_on_second_attempt"),
    ("codex", "fix_on_second_attempt"),
)


@dataclass
class Tally:
    attempts: int = 0
    runs: int = 0
    tool_requests: int = 0
    marked: int = 0
    compactions: int = 0
    failures: list[str] = field(default_factory=list)


def one_run(name: str, script: str, tally: Tally) -> None:
    from support import real_cli_scripts, real_clis
    from support.journal import events
    from support.repos import commit_all, make_project, make_repo

    # Where users keep repositories, not /tmp (the sandbox's private /tmp hides nothing here).
    scratch = Path(tempfile.mkdtemp(prefix="bench-rules-", dir=Path.home()))
    saved = dict(os.environ)
    try:
        home = scratch / "home"
        home.mkdir()
        isolate(home)
        repo = make_repo(scratch / "repo")
        make_project(repo)
        box = real_clis.make_sandbox()
        extra: dict[str, str] = {}
        if name == "claude" and script == "compact_twice_then_fix":
            extra["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] = str(real_cli_scripts.COMPACT_WINDOW)
        env = real_clis.cli_environment(name, box, **extra)
        real_clis.use_real_maker(repo, name, box, extra=STREAM if name == "claude" else "")
        if name == "codex":
            config = repo / ".loop" / "config.toml"
            config.write_text(config.read_text() + CODEX_PRICES)
        commit_all(repo, f"the real {name} as maker")
        run = real_clis.run_sealed(repo, box, env, "goal", "tests green", script=script)
        tally.runs += 1
        label = f"{name}/{script}#{tally.runs}"
        if run.done.returncode != 0:
            tally.failures.append(f"{label}: exit {run.done.returncode}")
        notes = [e.data for e in events(repo, "note") if e.data.get("what") == "rules"]
        tally.attempts += len(notes)
        markers = {f"loopctl-rules v1 sha256:{n['sha256']}" for n in notes}
        if len(markers) != 1:
            tally.failures.append(f"{label}: rules hashes on record: {sorted(markers)}")
            return
        (marker,) = markers
        for request in run.model_requests():
            if not request.tools:
                continue  # a title or summary request: it cannot call a tool
            tally.tool_requests += 1
            if marker in request.text:
                tally.marked += 1
            else:
                tally.failures.append(f"{label}: a tool-capable request without the marker")
        for finished in events(repo, "agent_finished"):
            tally.compactions += int(finished.data.get("compactions") or 0)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(scratch, ignore_errors=True)


def measure(attempts: int = 50) -> list[Row]:
    from support import real_clis

    kinds = [k for k in KINDS if (real_clis.CLIS_BIN / k[0]).exists()]
    if not kinds:
        print("no real CLI installed (scripts/install-agent-clis)")
        return []
    tally = Tally()
    turn = 0
    while tally.attempts < attempts:
        name, script = kinds[turn % len(kinds)]
        turn += 1
        one_run(name, script, tally)
        print(
            f"  {tally.runs} runs, {tally.attempts} attempts, {tally.tool_requests} tool-capable"
            f" requests, {tally.marked} with the marker, {tally.compactions} compactions",
            flush=True,
        )
    for failure in tally.failures:
        print(f"  ! {failure}")
    missing = tally.tool_requests - tally.marked
    return [
        Row(
            f"rules marker missing, of {tally.tool_requests} tool-capable requests",
            missing,
            "requests",
            goal="== 0",
            met=missing == 0 and tally.compactions >= 2 and not tally.failures,
            note=(
                f"{tally.attempts} attempts in {tally.runs} runs of the real "
                f"{'/'.join(sorted({k[0] for k in kinds}))}; {tally.compactions} compactions"
            ),
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--attempts", type=int, default=50)
    rows = measure(parser.parse_args().attempts)
    print_rows(rows)
    if not rows or rows[0].met is not True:
        sys.exit(1)


if __name__ == "__main__":
    main()
