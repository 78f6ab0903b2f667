"""`loopctl replay RUN --offline`: the rendering of an offline replay (replaying.offline).

Exit codes: 0 every request matched the recording and STATE.md came out the same; 1 the replay
diverged (the first divergent request is named) or STATE.md differs; 2 usage: an unknown run,
or a run that cannot be replayed (no cassette, a capped one, an encrypted tunnel).
"""

from __future__ import annotations

from pathlib import Path

import typer

from loopctl.cli.options import load_here


def offline_replay(
    run_id: str, *, json_out: bool, keep_going: bool, definitions: Path | None
) -> None:
    from loopctl.replaying.offline import replay_offline

    project = load_here(strict=False)
    found = replay_offline(project.root, run_id, strict=not keep_going, definitions=definitions)
    diverged = found.diverged
    if json_out:
        from loopctl.cli.render import print_json

        print_json(
            "replay",
            {
                "run": found.run,
                "offline": True,
                "identical": diverged is None and found.state_identical,
                "diverged": None
                if diverged is None
                else {
                    "attempt": diverged.attempt,
                    "index": diverged.index,
                    "detail": diverged.detail,
                },
                "state_identical": found.state_identical,
                "recorded_outcomes": found.recorded_outcomes,
                "replayed_outcomes": found.replayed_outcomes,
            },
        )
    elif diverged is not None:
        print(
            f"run {found.run} diverged offline at {diverged.attempt}, request {diverged.index}:"
            f" {diverged.detail}"
        )
    else:
        state = "identical" if found.state_identical else "different (see --json)"
        print(f"run {found.run} replayed offline: every request matched; STATE.md {state}")
    for task, then in found.recorded_outcomes.items():
        now = found.replayed_outcomes.get(task, "not replayed")
        if not json_out:
            print(f"  task {task}: recorded {then}, replayed {now}")
    if diverged is not None or not found.state_identical:
        raise typer.Exit(1)
