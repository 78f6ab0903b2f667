"""`loopctl replay RUN --offline`: a recorded run re-run against its cassettes (issue 31, item 5).

The run is re-run where it cannot touch the real one: a scratch folder under loopctl's cache
holds a clone of the repository at the run's base commit (its own objects and refs, no
remote: nothing is pushed), the checkout's current definitions laid over it (or
`definitions`: a proposal applied), the event log as it was before the run (so the prompt's
history is the same), and a `LOOPCTL_HOME` of its own (worktrees, CLI state). There `loopctl`
runs the command the run was started with, `REPLAY_PLAN` set: each agent turn's egress proxy
(or loopctl's own agent, for the API backends) reaches only a server on 127.0.0.1 that answers
from the recorded turn's cassette (engine.cassettes). The real `.loop/log/` is never appended
to: a replay is not a run of the project, and item 3's gate replays on every proposal; the
scratch folder is removed afterwards.

What is compared: each request (method, path, body as `egress_cassette.normalised`), and the
STATE.md of the log before the run plus the run, against the same plus the replayed run, with
run ids, times, commit ids and the places that differ by nature (`_STATE_VOLATILE`) replaced.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from loopctl import git
from loopctl.egress_cassette import REPLAY_PLAN, SUFFIX, CassetteError, read_cassette
from loopctl.errors import GitError, LoopctlError
from loopctl.journal import history
from loopctl.journal.events import Event, EventLog, EventType
from loopctl.journal.outcomes import of_task
from loopctl.journal.payload import read
from loopctl.journal.schema import AgentFinished, AgentStarted, TickStarted, WorktreeCreated
from loopctl.journal.state import render_state
from loopctl.paths import LOOP_DIR, ProjectPaths, cache_home
from loopctl.process import run as run_program

REPLAY_TIMEOUT = 3600.0
# The definition files a replay reads from the checkout (or from `definitions`), not the base.
DEFINITIONS = (
    f"{LOOP_DIR}/config.toml",
    f"{LOOP_DIR}/loops",
    "agents",
    "skills",
    ".claude/agents",
    ".claude/skills",
    ".codex/agents",
    ".agents/skills",
)
_STATE_VOLATILE = (
    (re.compile(r"\d{4}-\d{2}-\d{2}T[0-9:.]+(?:Z|[+-]\d{2}:?\d{2})?"), "<time>"),
    (re.compile(r"`[0-9a-f]{12}`"), "`<commit>`"),
)


@dataclass(frozen=True, slots=True)
class Divergence:
    """The first request of the replay that the recording does not answer."""

    attempt: str  # "<task>/attempt-<n>/<role>"
    index: int  # the request's index among that turn's recorded exchanges
    detail: str  # what was recorded vs what was asked, from the first difference


@dataclass(frozen=True, slots=True)
class OfflineReplay:
    """What an offline replay found: the first divergence (None: every request matched), each
    task's recorded and replayed outcome, and whether both renderings of STATE.md agree."""

    run: str
    diverged: Divergence | None
    recorded_outcomes: dict[str, str] = field(default_factory=dict)
    replayed_outcomes: dict[str, str] = field(default_factory=dict)
    state_identical: bool = False
    recorded_state: str = ""
    replayed_state: str = ""
    replay_run: str | None = None


def replay_offline(
    root: Path, run_id: str, *, strict: bool = True, definitions: Path | None = None
) -> OfflineReplay:
    """Re-run `run_id` of the project at `root` against its cassettes, offline.

    `definitions`: a folder to read the `.loop/` definitions from instead of the checkout's
    (a proposal applied): either laid out as `.loop/` (config.toml, loops/) or as a checkout
    (.loop/, agents/, skills/). `strict=False`: on a divergence, keep answering with the
    recorded responses in order and run to the end, so each task's replayed outcome is known.
    Raises UsageError for an unknown run, CassetteError for one that cannot be replayed."""
    paths = ProjectPaths(root)
    events = EventLog(paths.events_file).read()
    run = history.find_run(events, run_id)
    turns = recorded_turns(run)
    _refuse_unreplayable(paths, run, turns)
    argv = _command(run)
    base = _base_commit(run)
    (cache_home() / "replays").mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="loopctl-replay-", dir=cache_home() / "replays"))
    try:
        clone = _clone(root, base, scratch / "repo")
        _lay_definitions(definitions or root, clone, plain_loop_dir=definitions is not None)
        first = min(event.seq for event in run.events)
        before = [event for event in events if event.seq < first]
        _copy_log(paths.events_file, ProjectPaths(clone).events_file, first)
        results = scratch / "results.jsonl"
        plan = scratch / "plan.json"
        plan.write_text(
            json.dumps(
                {
                    "recorded": str(paths.runs_dir / run.run),
                    "within": str(root),
                    "strict": strict,
                    "results": str(results),
                }
            ),
            encoding="utf-8",
        )
        env = {**os.environ, "LOOPCTL_HOME": str(scratch / "home"), REPLAY_PLAN: str(plan)}
        env.pop("LOOPCTL_DEBUG_LOG", None)
        run_program(
            [sys.executable, "-m", "loopctl", *argv],
            cwd=clone,
            env=env,
            timeout=REPLAY_TIMEOUT,
            stdout_path=scratch / "replay.out",
            stderr_path=scratch / "replay.err",
        )
        replayed_events = EventLog(ProjectPaths(clone).events_file).read()
        replay = _replayed_run(replayed_events, first)
        diverged = _first_divergence(results, turns, replay, scratch)
        recorded_state = render_state(history.fold([*before, *run.events]).values())
        replayed_state = render_state(
            history.fold([*before, *(replay.events if replay else [])]).values()
        )
        names = {run.run: "<run>", **({replay.run: "<run>"} if replay else {})}
        return OfflineReplay(
            run=run.run,
            diverged=diverged,
            recorded_outcomes=_outcomes(run),
            replayed_outcomes=_outcomes(replay) if replay else {},
            state_identical=_state(recorded_state, names) == _state(replayed_state, names),
            recorded_state=recorded_state,
            replayed_state=replayed_state,
            replay_run=replay.run if replay else None,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def replayable_runs(root: Path, loop: str, limit: int = 3) -> list[str]:
    """The last `limit` runs of `loop` whose every agent turn has a complete cassette,
    newest first."""
    paths = ProjectPaths(root)
    runs = history.fold(EventLog(paths.events_file).read())
    found: list[str] = []
    for run in reversed(list(runs.values())):
        if run.loop != loop or run.finished is None:
            continue
        try:
            turns = recorded_turns(run)
            _refuse_unreplayable(paths, run, turns)
            _command(run)
        except LoopctlError:
            continue
        found.append(run.run)
        if len(found) >= limit:
            break
    return found


def recorded_turns(run: history.RunView) -> list[str]:
    """Each agent turn of `run`, "<task>/attempt-<n>/<role>", in the order they started."""
    turns: list[str] = []
    for event in run.events:
        # Started (a program's turn), or only finished (loopctl's own agent starts none).
        turned = event.type in (EventType.AGENT_STARTED, EventType.AGENT_FINISHED)
        if not turned or not event.task:
            continue
        who: AgentStarted | AgentFinished = (
            read(AgentStarted, event)
            if event.type == EventType.AGENT_STARTED
            else read(AgentFinished, event)
        )
        turn = f"{event.task}/attempt-{who.attempt}/{who.role}"
        if turn not in turns:
            turns.append(turn)
    return turns


def cassette_path(paths: ProjectPaths, run: str, turn: str) -> Path:
    folder, _, role = turn.rpartition("/")
    return paths.runs_dir / run / folder / f"{role}{SUFFIX}"


def _refuse_unreplayable(paths: ProjectPaths, run: history.RunView, turns: list[str]) -> None:
    if not turns:
        raise CassetteError(f"run {run.run} ran no agent: there is nothing to replay")
    for turn in turns:
        path = cassette_path(paths, run.run, turn)
        if not path.exists() and not path.is_symlink():
            raise CassetteError(
                f"run {run.run} has no cassette for {turn}: it was recorded without loopctl's"
                " egress proxy (sandbox off, network open or none, or an API backend)"
            )
        refusal = read_cassette(path, within=paths.root).refusal()
        if refusal is not None:
            raise CassetteError(refusal)


def _command(run: history.RunView) -> list[str]:
    """The arguments the run was started with (its `tick_started` command), after `loopctl`."""
    started = [read(TickStarted, e) for e in run.events if e.type == EventType.TICK_STARTED]
    command = started[0].command if started else None
    words = shlex.split(command) if isinstance(command, str) else []
    if len(words) < 2 or words[0] != "loopctl" or words[1] not in ("run", "goal"):
        raise CassetteError(f"run {run.run} does not say how it was started: cannot replay it")
    return words[1:]


def _base_commit(run: history.RunView) -> str:
    for event in run.events:
        if event.type == EventType.WORKTREE_CREATED:
            base = read(WorktreeCreated, event).base_sha
            if base:
                return base
    raise CassetteError(f"run {run.run} made no worktree: it has no base commit to replay from")


def _clone(root: Path, base: str, clone: Path) -> Path:
    """A clone of `root` at `base`, on the branch `root` has checked out, with no remote. Its
    objects are its own (hard links at most): the sandbox shows an agent its worktree's
    repository only, so objects borrowed from `root` (--shared) would be missing there."""
    branch = git.current_branch(root) or "main"
    try:
        git.git(
            ["clone", "--quiet", "--no-checkout", "--", str(root), str(clone)],
            cwd=clone.parent,
        )
        git.git(["checkout", "--quiet", "-B", branch, base], cwd=clone)
        git.git(["remote", "remove", "origin"], cwd=clone)
    except GitError as exc:
        raise LoopctlError(f"cannot make the replay's clone at {base[:12]}: {exc}") from exc
    return clone


def _lay_definitions(source: Path, clone: Path, *, plain_loop_dir: bool) -> None:
    """The definition files of `source` over the clone's: a `.loop/`-like folder (config.toml,
    loops/) or a checkout. Links are not followed."""
    if plain_loop_dir and not (source / LOOP_DIR).is_dir():
        pairs = [
            (source / "config.toml", clone / LOOP_DIR / "config.toml"),
            (source / "loops", clone / LOOP_DIR / "loops"),
        ]
    else:
        pairs = [(source / name, clone / name) for name in DEFINITIONS]
    for origin, target in pairs:
        if origin.is_symlink() or not origin.exists():
            continue
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        if origin.is_dir():
            shutil.copytree(origin, target, symlinks=True)
        else:
            shutil.copyfile(origin, target, follow_symlinks=False)


def _copy_log(source: Path, target: Path, first: int) -> None:
    """The log's records before seq `first`, as they are written."""
    target.parent.mkdir(parents=True, exist_ok=True)
    kept: list[bytes] = []
    if source.exists():
        for line in source.read_bytes().splitlines(keepends=True):
            try:
                seq = json.loads(line).get("seq")
            except ValueError:
                continue
            if isinstance(seq, int) and seq < first:
                kept.append(line)
    target.write_bytes(b"".join(kept))


def _replayed_run(events: list[Event], first: int) -> history.RunView | None:
    runs = history.fold(events)
    later = [r for r in runs.values() if r.events and min(e.seq for e in r.events) >= first]
    return later[-1] if later else None


def _first_divergence(
    results: Path, turns: list[str], replay: history.RunView | None, scratch: Path
) -> Divergence | None:
    played: list[str] = []
    if results.exists():
        for line in results.read_text(encoding="utf-8").splitlines():
            found = json.loads(line)
            played.append(str(found["turn"]))
            if found.get("divergence"):
                d = found["divergence"]
                return Divergence(str(d["attempt"]), int(d["index"]), str(d["detail"]))
    for turn in turns:
        if turn not in played:
            return Divergence(turn, 0, "this recorded turn was not replayed" + _why(scratch))
    if replay is None:
        return Divergence(turns[0], 0, "the replay did not start a run" + _why(scratch))
    return None


def _why(scratch: Path) -> str:
    """The replaying loopctl's last line of output, when it said something."""
    for name in ("replay.err", "replay.out"):
        path = scratch / name
        text = path.read_text(encoding="utf-8", errors="replace").strip() if path.exists() else ""
        if text:
            return f" (loopctl said: {text.splitlines()[-1][:200]})"
    return ""


def _outcomes(run: history.RunView) -> dict[str, str]:
    return {name: str(of_task(run, task) or task.status) for name, task in run.tasks.items()}


def _state(text: str, names: dict[str, str]) -> str:
    for name, placeholder in names.items():
        text = text.replace(name, placeholder)
    for pattern, placeholder in _STATE_VOLATILE:
        text = pattern.sub(placeholder, text)
    return text
