"""Property tests where a property is the real spec (issue 18): the schedule's due-time decisions,
the event log's torn-tail recovery and the merge of `state pull/push`, and redaction of a secret
at any offset across the chunks a program's output arrives in.

Each property is bounded (max_examples, no per-example deadline on a loaded 2-core machine) so the
whole file adds seconds, not minutes, to the suite. Approval binding under arbitrary sequences is
in test_approval_binding.py.
"""

from __future__ import annotations

import itertools
import math
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from loopctl.commands.state_sync import merge_logs
from loopctl.definitions import TriggerKind
from loopctl.journal.events import Event, EventLog, encode_line
from loopctl.process import _Capture
from loopctl.scheduling.timing import (
    Action,
    CatchUp,
    Fired,
    LoopTiming,
    Overlap,
    Schedule,
    decide,
    grace_s,
)
from loopctl.secrets import REDACTED, Redactor

FAST = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)

START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def no_jitter(name: str, slot: datetime, jitter_s: float) -> float:
    return 0.0


# --- the schedule ----------------------------------------------------------------------------

PERIODS = st.sampled_from([1.0, 5.0, 60.0, 300.0, 3600.0])


@FAST
@given(
    period=PERIODS,
    last=st.integers(min_value=0, max_value=10_000),
    elapsed_ms=st.integers(min_value=0, max_value=50_000_000),
    catch_up=st.sampled_from(list(CatchUp)),
)
def test_a_decision_names_the_latest_slot_at_or_before_now(
    period: float, last: int, elapsed_ms: int, catch_up: CatchUp
) -> None:
    last_slot = START + timedelta(seconds=last)
    now = last_slot + timedelta(milliseconds=elapsed_ms)
    schedule = Schedule(TriggerKind.EVERY, every_s=period, catch_up=catch_up)

    decision = decide("l", schedule, LoopTiming(START, last_slot=last_slot), now, jitter=no_jitter)

    due = last_slot + timedelta(seconds=period)
    if now < due:
        assert decision == type(decision)(Action.WAIT, wake=due)
        return
    assert decision.slot is not None
    steps = (decision.slot - last_slot).total_seconds() / period
    assert steps == int(steps)
    assert steps >= 1
    assert decision.slot <= now < decision.slot + timedelta(seconds=period)
    late = (now - decision.slot).total_seconds()
    on_time = int(steps) == 1 and late <= grace_s(period)
    assert decision.missed == (int(steps) - 1) + (0 if late <= grace_s(period) else 1)
    if on_time:
        assert (decision.action, decision.fired) == (Action.FIRE, Fired.SCHEDULE)
    elif catch_up is CatchUp.ONE:
        assert (decision.action, decision.fired) == (Action.FIRE, Fired.CATCH_UP)
    elif late > grace_s(period):
        assert decision.action is Action.SKIP
        assert f"{decision.missed} slot(s) missed" in decision.reason
    else:
        assert (decision.action, decision.fired) == (Action.FIRE, Fired.SCHEDULE)


@FAST
@given(
    period=PERIODS,
    gaps=st.lists(st.floats(min_value=0.0, max_value=4.0), min_size=1, max_size=25),
    overlap=st.sampled_from(list(Overlap)),
    busy=st.lists(st.booleans(), min_size=25, max_size=25),
)
def test_a_scheduler_asking_at_any_times_fires_each_slot_at_most_once_and_never_early(
    period: float, gaps: list[float], overlap: Overlap, busy: list[bool]
) -> None:
    """Ask at arbitrary moments (gaps in periods), apply each decision as the scheduler does, and
    ask again until WAIT: slots only move forward, none fires before it is due or twice."""
    schedule = Schedule(TriggerKind.EVERY, every_s=period, overlap=overlap)
    timing = LoopTiming(START, fire_on_start=True)
    now = START
    fired: list[datetime] = []
    recorded: list[datetime] = []  # fired, skipped or queued: the slots the log holds
    for gap, running in zip(gaps, busy, strict=False):
        now += timedelta(seconds=gap * period)
        timing = LoopTiming(
            START,
            last_slot=timing.last_slot,
            fire_on_start=True,
            running=running and timing.last_slot is not None,
            queued=timing.queued,
        )
        for _ in range(4):
            decision = decide("l", schedule, timing, now, jitter=no_jitter)
            if decision.action is Action.WAIT:
                assert decision.wake is None or decision.wake > now
                break
            slot = decision.slot
            assert slot is not None
            assert slot <= now
            if decision.action is Action.FIRE:
                assert slot not in fired
                fired.append(slot)
                timing = LoopTiming(START, last_slot=max(slot, timing.last_slot or slot))
            elif decision.action is Action.QUEUE:
                assert timing.running
                assert timing.queued is None
                recorded.append(slot)
                timing = LoopTiming(
                    START, last_slot=slot, running=True, queued=slot, fire_on_start=True
                )
            else:
                recorded.append(slot)
                timing = LoopTiming(
                    START, last_slot=slot, running=timing.running, queued=timing.queued
                )
        else:
            raise AssertionError(f"no WAIT after 4 decisions at {now}")
    assert fired == sorted(fired)
    assert len(set(recorded)) == len(recorded)


# --- the event log ---------------------------------------------------------------------------

PAYLOADS = st.dictionaries(
    st.text(min_size=1, max_size=8),
    st.one_of(
        st.integers(min_value=-(2**53), max_value=2**53),
        st.text(max_size=40),
        st.booleans(),
        st.none(),
        st.lists(st.integers(min_value=0, max_value=9), max_size=3),
    ),
    max_size=4,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
@given(
    payloads=st.lists(PAYLOADS, min_size=1, max_size=6),
    cut=st.floats(min_value=0.0, max_value=1.0, exclude_max=True),
)
def test_a_torn_last_record_is_dropped_then_cut_and_the_log_goes_on(
    payloads: list[dict[str, object]], cut: float
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        log = EventLog(Path(folder) / "events.jsonl")
        for payload in payloads:
            log.append("note", data=payload)
        raw = log.path.read_bytes()
        last_start = raw.rfind(b"\n", 0, len(raw) - 1) + 1
        keep = last_start + math.floor(cut * (len(raw) - last_start))
        assume(keep < len(raw))
        log.path.write_bytes(raw[:keep])  # the last append died part-way

        reader = EventLog(log.path)
        survivors = reader.read()
        assert [e.data for e in survivors] == payloads[:-1]
        appended = reader.append("note", data={"after": "crash"})
        assert appended.seq == len(payloads)
        again = EventLog(log.path).read()
        assert [e.seq for e in again] == list(range(1, len(payloads) + 1))
        assert again[-1].data == {"after": "crash"}


def _events(kinds: list[str], first_seq: int = 1, tag: str = "") -> list[Event]:
    return [
        Event(
            first_seq + i,
            f"2026-12-01T00:00:{i:02d}+00:00",
            "note",
            None,
            None,
            None,
            {"what": kind, "side": tag},
        )
        for i, kind in enumerate(kinds)
    ]


@FAST
@given(
    shared=st.lists(st.sampled_from("abc"), max_size=5),
    mine=st.lists(st.sampled_from("lmn"), max_size=5),
    theirs=st.lists(st.sampled_from("rst"), max_size=5),
)
def test_merging_two_clones_loses_and_doubles_nothing_and_is_idempotent(
    shared: list[str], mine: list[str], theirs: list[str]
) -> None:
    prefix = _events(shared, tag="shared")
    local = [*prefix, *_events(mine, len(prefix) + 1, "local")]
    remote = [*prefix, *_events(theirs, len(prefix) + 1, "remote")]

    merged = merge_logs(local, remote)

    # The remote's log only grows: it is a prefix of the merge, seqs unchanged.
    assert list(merged.events[: len(remote)]) == remote
    assert [(e.data["what"], e.data["side"]) for e in merged.events] == [
        *((k, "shared") for k in shared),
        *((k, "remote") for k in theirs),
        *((k, "local") for k in mine),
    ]
    assert [e.seq for e in merged.events] == list(range(1, len(merged.events) + 1))
    assert (merged.common, merged.received, merged.rebased, merged.duplicates) == (
        len(shared),
        len(theirs),
        len(mine),
        0,
    )
    assert merged.rewrites_local is bool(mine and theirs)
    # Pulling again, or the other side pulling the pushed result, changes nothing more.
    again = merge_logs(list(merged.events), list(merged.events))
    assert again.events == merged.events
    assert again.received == again.rebased == 0
    other_side = merge_logs(remote, list(merged.events))
    assert other_side.events == merged.events
    assert other_side.rebased == 0
    # The merged log is a valid log: each line's encoding reads back as itself.
    assert all(encode_line(e).endswith(b"\n") for e in merged.events)


# --- redaction across chunk boundaries -------------------------------------------------------

SECRET_CHARS = st.characters(min_codepoint=33, max_codepoint=126)
TEXT = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40)


@FAST
@given(
    secret=st.text(SECRET_CHARS, min_size=6, max_size=24),
    before=TEXT,
    after=TEXT,
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=6),
)
# A run of overlapping matches cut at a read: the byte after the cut continues the run, and
# must join its mask (issue 27 found it leaking one character as a second, shorter region).
@example(secret="000000", before="00000", after="00000", cuts=[15])
@example(secret="abab" * 2, before="ab" * 7, after="ab" * 5, cuts=[9, 17, 18])
def test_a_secret_at_any_offset_split_across_any_reads_never_reaches_the_output(
    secret: str, before: str, after: str, cuts: list[int]
) -> None:
    redactor = Redactor([secret])
    whole = f"{before}{secret}{after}".encode()
    capture = _Capture(None, redactor, tail_bytes=10_000)
    points = sorted({min(c, len(whole)) for c in cuts} | {0, len(whole)})
    for start, end in itertools.pairwise(points):
        capture.feed(whole[start:end])
    capture.finish()

    out = capture.tail()

    assert secret not in out
    assert out == redactor.redact(whole.decode())  # the same as redacting it in one piece
    assert REDACTED in out
