"""Invariants 3 and 9 under random delivery plans, approvals, rejections, moves and crashes.

Over 200 generated cases: no gated action runs without an `approved` event for its item bound
to the commit the item showed, none runs twice, a rejected or moved-away approval delivers
nothing. Crashes are simulated in-process (an exception between `action_started` and
`action_finished`, before or after the effect) and for real (SIGKILL of a `loopctl inbox
approve` subprocess by the action itself). Two processes approving one item: one delivers.
"""

from __future__ import annotations

import json
import random
import shlex
import signal
import subprocess
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support.cli import assert_clean_exit, invoke, loopctl_argv
from support.delivery import action, ledger_entries, ship_loop, the_approval
from support.journal import events
from support.repos import add_remote, git, make_project

from loopctl.commands import inbox as inbox_actions
from loopctl.commands.inbox_show import InboxError
from loopctl.definitions import Loop, load_project
from loopctl.definitions.config import KeepPolicy
from loopctl.definitions.loops import Action, DeliverSpec, WorktreeSpec
from loopctl.definitions.project import Project
from loopctl.delivery import pipeline as delivery
from loopctl.delivery import remotes
from loopctl.delivery.gates import Step
from loopctl.errors import LockHeld
from loopctl.journal.events import Event, EventType
from loopctl.journal.inbox import items
from loopctl.journal.recorder import Recorder
from loopctl.lock import RunnerLock
from loopctl.worktrees import branch_name

CASES = 200
PER_REPO = 10
LOOP = "prop"


class Crash(BaseException):
    """Stands in for the process dying at a checkpoint (not an Exception: nothing catches it)."""


@dataclass
class Case:
    number: int
    steps: list[str]
    gated: set[str]
    failing: set[str]
    sha: str
    moved_at: int | None = None  # log seq when the branch was moved away from `sha`
    rejected_steps: set[int] = field(default_factory=set)
    crashed: bool = False  # a simulated crash hit one of its deliveries
    refusals: list[str] = field(default_factory=list)  # what loopctl said no with

    @property
    def clean(self) -> bool:
        """Nothing stood in its way: no crash, move, rejection, failing action or merge (a
        fast-forward another case's merge may have made impossible)."""
        return not (
            self.crashed
            or self.moved_at is not None
            or self.rejected_steps
            or self.failing
            or "merge" in self.steps
        )

    @property
    def run(self) -> str:
        return f"run{self.number}"

    @property
    def task(self) -> str:
        return f"t{self.number}"


def custom_argv(ledger: Path, name: str, fail: bool) -> tuple[str, ...]:
    # sh starts in a millisecond; the line says which run, task and commit ran the action.
    line = f'printf "%s %s {name} %s\\n" "$LOOPCTL_RUN" "$LOOPCTL_TASK" "$LOOPCTL_COMMIT"'
    script = f"{line} >> {shlex.quote(str(ledger))}" + ("; exit 3" if fail else "")
    return ("sh", "-c", script)


def new_repo(folder: Path) -> tuple[Path, Path]:
    folder.mkdir()
    root = folder / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "README.md").write_text("hello\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    remote = folder / "remote.git"
    git(folder, "init", "-q", "--bare", str(remote))
    git(root, "remote", "add", "origin", str(remote))
    return root, remote


def hook_for(rng: random.Random) -> delivery.Checkpoint | None:
    """A checkpoint that crashes at the k-th durable step, or None (no crash) most times."""
    if rng.random() > 0.35:
        return None
    when = rng.choice(("started", "ran"))
    calls = rng.randint(1, 3)

    def checkpoint(stage: str, step: Step) -> None:
        nonlocal calls
        if stage == when:
            calls -= 1
            if calls == 0:
                raise Crash(f"{stage} {step.name}")

    return checkpoint


def play(case: Case, rng: random.Random, root: Path, ledger: Path, base: str) -> None:
    project = load_project(root)
    rec = Recorder(project)
    actions = [Action("commit")]
    for name in case.steps:
        if name in ("push", "merge"):
            actions.append(Action(name))
        else:
            actions.append(Action(name, custom_argv(ledger, name, name in case.failing)))
    loop = Loop(
        name=LOOP,
        path=root / ".loop" / "loops" / f"{LOOP}.toml",
        deliver=DeliverSpec(actions=tuple(actions), approve=tuple(sorted(case.gated))),
        worktree=WorktreeSpec(keep=rng.choice(list(KeepPolicy))),
    )
    branch = branch_name(LOOP, case.task)
    # As the engine's tick does before any agent runs: pin where `origin` leads, the only URL a
    # delivery of this run may push to (without it every push fails and nothing is delivered).
    rec.log.append(
        EventType.TICK_STARTED, run=case.run, loop=LOOP, data=remotes.tick_fields(root, loop)
    )

    def engine_delivery(crashes: bool = True) -> None:
        # What the engine does after the check passed (and again when a killed run resumes).
        result = delivery.deliver_task(
            rec,
            loop,
            case.run,
            case.task,
            commit=case.sha,
            branch=branch,
            base_sha=base,
            base_ref="main",
            worktree=None,
            checkpoint=hook_for(rng) if crashes else None,
        )
        plan = delivery.delivery_view(rec.log.read(), case.run, case.task).plan
        assert plan is not None
        delivery.complete(rec, plan, result)

    engine_done = False
    try:
        engine_delivery()
        engine_done = True
    except Crash:
        case.crashed = True
    for _ in range(rng.randint(1, 5)):
        open_gate = next(
            (
                i
                for i in items(rec.log.read())
                if i.is_open and i.kind == "approval" and i.task == case.task
            ),
            None,
        )
        op = rng.choice(("approve", "approve", "approve", "reject", "resume", "move", "engine"))
        try:
            if op == "approve" and open_gate is not None:
                inbox_actions.approve(
                    project, open_gate.id[: rng.randint(4, 6)], checkpoint=hook_for(rng)
                )
            elif op == "reject" and open_gate is not None:
                if not open_gate.approved:
                    case.rejected_steps.add(int(open_gate.evidence["step"]))
                inbox_actions.reject(project, open_gate.id, "no")
            elif op == "resume":
                with RunnerLock(project.paths.locks_dir, LOOP):
                    delivery.deliver_approved(rec, LOOP, checkpoint=hook_for(rng))
            elif op == "move" and case.moved_at is None:
                moved = git(root, "commit-tree", f"{branch}^{{tree}}", "-p", branch, "-m", "moved")
                case.moved_at = rec.log.last_seq()
                git(root, "update-ref", f"refs/heads/{branch}", moved.strip())
            elif op == "engine" and not engine_done:
                engine_delivery()
                engine_done = True
        except Crash:
            case.crashed = True
        except (InboxError, LockHeld) as refused:
            # Closed, refused, unknown outcome or busy: a refusal is a fine answer, any other
            # error (a git failure, a corrupt log) is a bug and fails the test. Busy happens
            # here though each chunk is one process: a chunk's custom action forked by another
            # thread holds a copy of its lock's descriptor until it execs.
            case.refusals.append(str(refused))
    settle(case, project, rec, engine_delivery if not engine_done else None)


EXPECTED_REFUSALS = (
    "already closed",
    "outcome is unknown",
    "already approved",
    "is already running",
    "was just approved by another process",
    "too late to reject",
)


def settle(case: Case, project: Project, rec: Recorder, engine: Callable[..., None] | None) -> None:
    """The human approves whatever is still open, crash-free, until nothing is: every
    approved step of a clean case must then be delivered exactly once."""
    if engine is not None:
        engine(crashes=False)
    for _ in range(3 * len(case.steps) + 3):
        gate = next(
            (
                i
                for i in items(rec.log.read())
                if i.is_open and i.kind == "approval" and i.task == case.task
            ),
            None,
        )
        if gate is None:
            break
        try:
            inbox_actions.approve(project, gate.id)
        except InboxError as refused:
            case.refusals.append(str(refused))
            if "already approved" not in str(refused):  # busy for a moment: ask again
                break


def check(
    case: Case, log: list[Event], ledger: list[tuple[str, ...]], remote_sha: str | None
) -> None:
    mine = [e for e in log if e.run == case.run and e.task == case.task]
    opened = {
        e.data["id"]: e.data["evidence"]
        for e in mine
        if e.type == EventType.INBOX_OPENED and e.data["kind"] == "approval"
    }
    started = [e for e in mine if e.type == EventType.ACTION_STARTED]
    for start in started:
        step, name = start.data["step"], start.data["action"]
        assert start.data["commit"] == case.sha
        if name not in case.gated:
            continue
        # Invariant 3: an `approved` event for this exact item, bound to the shown sha, and no
        # refusal between it and the start.
        item = start.data["approval"]
        assert opened[item]["step"] == step, (case, start)
        assert opened[item]["commit"] == case.sha
        verdicts = [
            e
            for e in mine
            if e.seq < start.seq
            and e.data.get("id") == item
            and e.type in (EventType.APPROVED, EventType.APPROVAL_REFUSED)
        ]
        assert verdicts, (case, start)
        assert verdicts[-1].type == EventType.APPROVED, (case, start)
        assert verdicts[-1].data["sha"] == case.sha
        # Invariant 9: once the branch moved, no approval applies any more.
        assert case.moved_at is None or start.seq <= case.moved_at, (case, start)
        assert step not in case.rejected_steps, (case, start)
    # A custom action is never started twice (its effect cannot be checked), and ran at most once.
    custom_starts = Counter(
        e.data["action"] for e in started if e.data["action"] not in ("push", "merge")
    )
    assert all(n == 1 for n in custom_starts.values()), (case, custom_starts)
    ran = Counter(name for run, task, name, _ in ledger if (run, task) == (case.run, case.task))
    assert all(n == 1 for n in ran.values()), (case, ran)
    for name in ran:
        assert name in custom_starts, (case, name)
        assert all(
            sha == case.sha
            for run, task, n, sha in ledger
            if (run, task, n) == (case.run, case.task, name)
        )
    # Push: the remote has the branch only if an (approved, when gated) push started.
    pushed = any(e.data["action"] == "push" for e in started)
    if remote_sha is not None:
        assert pushed, case
        assert remote_sha == case.sha
    for refusal in case.refusals:
        assert any(phrase in refusal for phrase in EXPECTED_REFUSALS), (case, refusal)
    if case.clean:
        # Exactly once: every step (approved by the human when gated) started once, finished
        # once and succeeded; pushed means on the remote, a custom action ran once.
        finished = [e for e in mine if e.type == EventType.ACTION_FINISHED]
        assert sorted(e.data["action"] for e in started) == sorted(case.steps), case
        assert [e.data["ok"] for e in finished] == [True] * len(case.steps), (case, finished)
        if "push" in case.steps:
            assert remote_sha == case.sha, case
        assert sorted(ran) == sorted(s for s in case.steps if s.startswith("c")), (case, ran)
        assert mine[-1].type != EventType.INBOX_OPENED, case


def run_chunk(tmp_path: Path, chunk: int) -> int:
    """PER_REPO cases in one repository (a short log keeps each case cheap); returns the count."""
    rng = random.Random(20261130 + chunk)
    pool = ["push", "merge", "c1", "c2", "c3"]
    root, remote = new_repo(tmp_path / f"chunk{chunk}")
    ledger = tmp_path / f"ledger{chunk}.txt"
    base = git(root, "rev-parse", "HEAD").strip()
    cases = []
    for index in range(PER_REPO):
        number = chunk * PER_REPO + index
        steps = rng.sample(pool, rng.randint(1, 4))
        gated = {s for s in steps if rng.random() < 0.65}
        failing = {s for s in steps if s.startswith("c") and rng.random() < 0.1}
        sha = git(root, "commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m", f"case {number}").strip()
        git(root, "update-ref", f"refs/heads/{branch_name(LOOP, f't{number}')}", sha)
        case = Case(number, steps, gated, failing, sha)
        play(case, rng, root, ledger, base)
        cases.append(case)
    log = Recorder(load_project(root)).log.read()
    text = ledger.read_text() if ledger.exists() else ""
    lines = [tuple(line.split()) for line in text.splitlines()]
    listed = git(remote, "for-each-ref", "--format=%(objectname) %(refname)").splitlines()
    refs = {ref: sha for sha, ref in (line.split(" ", 1) for line in listed)}
    for case in cases:
        check(case, log, lines, refs.get(f"refs/heads/{branch_name(LOOP, case.task)}"))
    return sum(case.clean for case in cases)


def test_no_gated_action_runs_without_its_approval_and_none_runs_twice(tmp_path: Path) -> None:
    # Chunks are independent repositories; running a few at once overlaps their fsyncs and
    # subprocess start-ups (each chunk's own sequence stays deterministic).
    with ThreadPoolExecutor(max_workers=4) as pool:
        clean = list(pool.map(lambda chunk: run_chunk(tmp_path, chunk), range(CASES // PER_REPO)))
    # The exactly-once check must have had something to bite on: a run that never delivered
    # anything would otherwise pass every check above.
    assert sum(clean) >= CASES // 10, clean


# --- real processes ---------------------------------------------------------------------------


def approval_for(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *flags: str
) -> tuple[Path, str]:
    ledger = tmp_path / "ledger.jsonl"
    make_project(repo, "fixer.py")
    add_remote(repo, tmp_path)
    ship_loop(repo, f'actions = ["commit", {action(ledger, "deploy", *flags)}]')
    assert invoke(monkeypatch, repo, "run", "ship", "--once").exit_code == 0
    return ledger, the_approval(monkeypatch, repo)["id"]


@pytest.mark.parametrize("when", ["--kill-parent-after", "--kill-parent-before"])
def test_a_killed_approval_never_runs_its_action_again(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    ledger, item = approval_for(repo, tmp_path, monkeypatch, when)

    killed = subprocess.run(
        loopctl_argv("inbox", "approve", item), cwd=repo, capture_output=True, text=True, timeout=60
    )
    assert killed.returncode == -signal.SIGKILL
    ran = len(ledger_entries(ledger))
    assert ran == (1 if when == "--kill-parent-after" else 0)
    (started,) = events(repo, "action_started")
    assert events(repo, "action_finished") == []
    # The item still shows the approval; approving again settles it without running it again.
    again = subprocess.run(
        loopctl_argv("inbox", "approve", item), cwd=repo, capture_output=True, text=True, timeout=60
    )

    assert_clean_exit(again, 1)
    assert "outcome is unknown" in again.stderr
    assert len(ledger_entries(ledger)) == ran
    assert len(events(repo, "action_started")) == 1
    (finished,) = events(repo, "action_finished")
    assert finished.data["ok"] is None
    assert started.data["approval"] == item


def test_two_processes_approving_one_item_deliver_it_once(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, item = approval_for(repo, tmp_path, monkeypatch)

    racers = [
        subprocess.Popen(
            loopctl_argv("inbox", "approve", item),
            cwd=repo,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [(p.wait(timeout=60), *p.communicate()) for p in racers]

    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 1], results
    (loser,) = [err for code, _, err in results if code == 1]
    assert "already" in loser or "just approved" in loser, loser
    assert len(ledger_entries(ledger)) == 1
    assert len(events(repo, "approved")) == 1
    assert len(events(repo, "action_started")) == 1
    assert all("Traceback" not in out + err for _, out, err in results)
    assert (
        json.loads(
            subprocess.run(
                loopctl_argv("inbox", "--json", "--all"),
                cwd=repo,
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout
        )["inbox"][0]["resolution"]
        == "approved"
    )
