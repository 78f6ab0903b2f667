"""Spans and token metrics derived from the event log, after the OpenTelemetry GenAI conventions.

Pure: events in, span and metric records out; nothing here imports OpenTelemetry. The live
exporter (`loopctl.journal.otel`) feeds a `TraceBuilder` each event as the engine appends it;
`loopctl traces export` feeds it a past run's log. Trace and span ids are hashes of the run id
and each span's place in the run, so a live trace and one rebuilt later are the same trace.

The tree of one run (one trace):

    invoke_workflow {loop}          the tick (or goal run), from tick_started to tick_finished
      task                          task_found .. task_finished
        attempt                     attempt_started .. attempt_finished
          invoke_agent {agent}      one maker / checker (judge) turn, from agent_finished
            execute_tool {tool}     each tool call of loopctl's own agent (HTTP backends)
          execute_tool {check}      each check command
        execute_tool {action}       each delivery action (commit, push, open a PR)

Prompt and output text, task titles and verdict reasons are left out unless `capture_content`;
every string goes through `redact` on its way into a record.

This module folds the events into spans (one handler per event type); the records, their ids and
the building of one span are `journal/spans.py`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from loopctl.journal import schema
from loopctl.journal.events import Event
from loopctl.journal.spans import (
    HistogramPoint,
    RunSpans,
    SpanBuilder,
    SpanEventRecord,
    SpanRecord,
    TraceBatch,
    as_int,
    as_text,
    provider_name,
    seconds_ns,
    span_id,
    started_ns,
    time_ns,
    tool_name,
)

# Reads the prompt an agent was given: (run, task, attempt, role) -> text, or None if gone.
PromptReader = Callable[[str, str, int, str], str | None]

MAX_TOOL_SPANS = 500  # per agent turn: a runaway session must not make a giant trace


class TraceBuilder(SpanBuilder):
    """Turns events, in log order, into finished spans and per-run token histograms."""

    def __init__(
        self,
        *,
        capture_content: bool = False,
        redact: Callable[[str], str] = str,
        prompts: PromptReader | None = None,
    ) -> None:
        super().__init__(capture_content=capture_content, redact=redact)
        self._prompts = prompts
        self._runs: dict[str, RunSpans] = {}

    def feed(self, event: Event) -> TraceBatch:
        """Take one event; return the spans (and metrics) it completes."""
        if event.run is None:
            return TraceBatch()
        at = time_ns(event.ts)
        run = self._runs.get(event.run)
        if run is None:
            run = self._runs[event.run] = RunSpans(event.run, event.loop, at, at)
        run.last_ns = max(run.last_ns, at)
        handler = _HANDLERS.get(event.type)
        if handler is None:
            return TraceBatch()
        return handler(self, run, event, at)

    def flush(self) -> TraceBatch:
        """Close what is still open (a run still going, or killed) at its last event; forget all.

        Such spans carry `loopctl.unfinished = true`; the live exporter never sends them, since
        the process that resumes the run sends the real ones.
        """
        batch = TraceBatch()
        for run in self._runs.values():
            spans = [
                self._close(run, item, run.last_ns, {"loopctl.unfinished": True})
                for item in (
                    *run.actions.values(),
                    *run.attempts.values(),
                    *run.tasks.values(),
                    *([run.tick] if run.tick is not None else []),
                )
            ]
            points = () if run.finished else self._token_points(run, run.last_ns)
            batch += TraceBatch(tuple(spans), points)
        self._runs.clear()
        return batch

    def _forget_if_idle(self, run: RunSpans) -> None:
        """Drop a run with nothing open, so a long-lived process does not grow (see `flush`)."""
        if run.tick is None and not (run.tasks or run.attempts or run.actions or run.usage):
            self._runs.pop(run.run, None)

    # --- one handler per event type ------------------------------------------------------------

    def _tick_started(self, run: RunSpans, event: Event, at: int) -> TraceBatch:
        started = schema.tick_started(event)
        loop = event.loop or "loop"
        run.first_ns = at
        run.tick = self._open_workflow(run, loop, at)
        run.tick.attributes.update(
            {
                "loopctl.tick.kind": started.kind,
                "loopctl.trigger": as_text(started.trigger.get("fired")),
                "loopctl.maker": started.maker,
                "loopctl.checker": started.judge,
                "loopctl.in_place": started.in_place or None,
                "loopctl.check.command": " ".join(started.check)
                if started.check is not None
                else None,
                "loopctl.goal": self._content(started.condition),
            }
        )
        return TraceBatch()

    def _run_resumed(self, run: RunSpans, event: Event, at: int) -> TraceBatch:
        if run.tick is None:  # its start is not in what we were given: start here
            run.tick = self._open_workflow(run, event.loop, at)
        self._mark(run, event, at, {})
        return TraceBatch()

    def _tasks_listed(self, run: RunSpans, event: Event, at: int) -> TraceBatch:
        if run.tick is not None:
            run.tick.attributes["loopctl.tasks.found"] = schema.read(
                schema.TasksListed, event
            ).count
        return TraceBatch()

    def _task_found(self, run: RunSpans, event: Event, at: int) -> TraceBatch:
        task = event.task
        if task is None or task in run.tasks:
            return TraceBatch()
        found = schema.task_found(event)
        item = run.tasks[task] = self._open_task(run, task, at)
        item.attributes["loopctl.task.title"] = self._content(found.title)
        item.attributes["loopctl.task.prompt"] = self._content(found.prompt)
        return TraceBatch()

    def _attempt_started(self, run: RunSpans, event: Event, at: int) -> TraceBatch:
        number = schema.attempt_started(event).attempt
        if event.task is None or number is None:
            return TraceBatch()
        key = (event.task, number)
        if key in run.attempts:  # redone after an interruption: one span, marked
            run.attempts[key].events.append(SpanEventRecord("attempt_restarted", at, {}))
            return TraceBatch()
        run.attempts[key] = self._open_attempt(run, event.task, number, at)
        return TraceBatch()

    def _agent_finished(self, run: RunSpans, event: Event, at: int) -> TraceBatch:
        turn = schema.agent_finished(event)  # counts clamped: OTLP counts are int64
        agent = turn.agent or "agent"
        backend = turn.backend or "unknown"
        request_model = turn.request_model or turn.model
        response_model = turn.model
        provider = provider_name(backend, request_model)
        number = turn.attempt
        role = turn.role
        start = at - seconds_ns(turn.duration_s)
        parent = (
            span_id(run.run, "attempt", event.task, number)
            if event.task is not None and number
            else self._task_id(run, event.task)
        )
        own = span_id(run.run, "agent", event.seq)
        inp, out = turn.input_tokens, turn.output_tokens
        status = turn.status or "ok"
        attrs: dict[str, object] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "gen_ai.provider.name": provider,
            "gen_ai.conversation.id": run.run,
            "gen_ai.request.model": request_model,
            "gen_ai.response.model": response_model,
            "gen_ai.usage.input_tokens": inp,
            "gen_ai.usage.output_tokens": out,
            "gen_ai.usage.cache_read.input_tokens": turn.cached_tokens,
            "loopctl.task.id": event.task,
            "loopctl.attempt.number": number,
            "loopctl.agent.role": role,
            "loopctl.agent.backend": backend,
            "loopctl.agent.status": status,
            "loopctl.agent.exit_code": turn.exit_code,
            "loopctl.agent.turns": turn.turns,
            "loopctl.cost_usd": turn.cost_usd,
        }
        if self.capture_content:
            prompt = None
            if self._prompts is not None and event.task is not None and number and role:
                prompt = self._prompts(run.run, event.task, number, role)
            text = self._content(prompt)
            if text is not None:
                attrs["gen_ai.input.messages"] = _messages("user", text)
            said = self._content(turn.text, keep_end=True)
            if said is not None:
                attrs["gen_ai.output.messages"] = _messages("assistant", said)
        spans = [
            self._span(
                run,
                own,
                parent,
                f"invoke_agent {agent}",
                start,
                at,
                attrs,
                error=status if status not in ("ok", "approval") else None,
            )
        ]
        for index, call in enumerate(turn.tool_calls[:MAX_TOOL_SPANS]):
            spans.append(self._tool_call(run, event, own, start, index, call))
        for kind, value in (("input", inp), ("output", out)):
            if value is None:
                continue
            key = {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.provider.name": provider,
                "gen_ai.token.type": kind,
                "gen_ai.request.model": request_model,
                "gen_ai.response.model": response_model,
            }
            frozen = tuple(sorted(self._attrs(key).items()))
            run.usage.setdefault(frozen, []).append(value)
        return TraceBatch(tuple(spans))

    def _tool_call(
        self,
        run: RunSpans,
        event: Event,
        parent: str,
        agent_start: int,
        index: int,
        call: dict[str, Any],
    ) -> SpanRecord:
        name = as_text(call.get("name")) or "tool"
        start = agent_start + seconds_ns(call.get("start_s"))
        return self._span(
            run,
            span_id(run.run, "tool", event.seq, index),
            parent,
            f"execute_tool {name}",
            start,
            start + seconds_ns(call.get("duration_s")),
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.type": "function",
                "gen_ai.tool.call.id": as_text(call.get("id")),
                "gen_ai.conversation.id": run.run,
            },
            error="tool_error" if call.get("error") is True else None,
        )

    def _check_finished(self, run: RunSpans, event: Event, at: int) -> TraceBatch:
        checked = schema.check_finished(event)
        number = checked.attempt
        if event.task is None or number is None:
            return TraceBatch()
        parent = span_id(run.run, "attempt", event.task, number)
        attempt = run.attempts.get((event.task, number))
        if attempt is not None:
            attempt.attributes.update(
                {
                    "loopctl.check.passed": checked.passed,
                    "loopctl.check.source": checked.source or "",
                    "loopctl.check.fingerprint": checked.fingerprint or "",
                }
            )
        spans = []
        commands = checked.commands
        for index, ran in enumerate(commands):
            argv = (
                [str(a) for a in ran.get("argv", [])] if isinstance(ran.get("argv"), list) else []
            )
            start = started_ns(ran.get("started"), at)
            code = as_int(ran.get("exit_code"))
            error = None
            if ran.get("timed_out") is True:
                error = "timeout"
            elif code != 0:
                error = f"exit_{code}" if code is not None else "killed"
            name = tool_name(argv)
            # The output tail the event keeps is the last command's (the one that decided).
            last = index == len(commands) - 1
            spans.append(
                self._span(
                    run,
                    span_id(run.run, "check", event.seq, index),
                    parent,
                    f"execute_tool {name}",
                    start,
                    start + seconds_ns(ran.get("duration_s")),
                    {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": name,
                        "gen_ai.tool.type": "function",
                        "gen_ai.conversation.id": run.run,
                        "loopctl.check.command": " ".join(argv),
                        "loopctl.check.exit_code": code,
                        "gen_ai.tool.call.result": self._content(checked.output_tail, keep_end=True)
                        if last
                        else None,
                    },
                    error=error,
                )
            )
        return TraceBatch(tuple(spans))

    def _attempt_finished(self, run: RunSpans, event: Event, at: int) -> TraceBatch:
        ended = schema.attempt_finished(event)
        number = ended.attempt
        if event.task is None or number is None:
            return TraceBatch()
        item = run.attempts.pop((event.task, number), None)
        if item is None:  # its start is not in what we were given
            item = self._open_attempt(run, event.task, number, at)
        verdict = ended.verdict or "unknown"
        extra = {
            "loopctl.attempt.verdict": verdict,
            "loopctl.attempt.fingerprint": ended.fingerprint,
            "loopctl.attempt.reason": self._content(ended.reason),
        }
        error = verdict if verdict == "failed" else None
        return TraceBatch((self._close(run, item, at, extra, error),))

    def _task_finished(self, run: RunSpans, event: Event, at: int) -> TraceBatch:
        if event.task is None:
            return TraceBatch()
        item = run.tasks.pop(event.task, None)
        if item is None:
            item = self._open_task(run, event.task, at)
        outcome = schema.task_finished(event)
        status = outcome.status or "unknown"
        extra = {
            "loopctl.task.status": status,
            "loopctl.task.attempts": outcome.attempts,
            "loopctl.task.commit": outcome.commit,
            "loopctl.task.reason": self._content(outcome.reason),
        }
        error = status if status in ("failed", "stopped") else None
        return TraceBatch((self._close(run, item, at, extra, error),))

    def _tick_finished(self, run: RunSpans, event: Event, at: int) -> TraceBatch:
        ended = schema.tick_finished(event)
        status = ended.status or "unknown"
        extra: dict[str, object] = {
            "loopctl.tick.status": status,
            "loopctl.tick.reason": self._content(ended.reason),
        }
        for name, count in sorted(ended.tasks.items()):
            extra[f"loopctl.tasks.{name}"] = count
        item = run.tick or self._open_workflow(run, event.loop, run.first_ns)
        error = status if status in ("failed", "stopped") else None
        span = self._close(run, item, at, extra, error)
        points = self._token_points(run, at)
        # What a tick leaves open never closes now; actions that run later (after an approval)
        # open their own spans.
        run.tick = None
        run.tasks.clear()
        run.attempts.clear()
        run.finished = True
        self._forget_if_idle(run)
        return TraceBatch((span,), points)

    def _action_started(self, run: RunSpans, event: Event, at: int) -> TraceBatch:
        started = schema.read(schema.ActionStarted, event)
        step = started.step or 0
        item = run.actions[(event.task, step)] = self._open_action(run, event, step, at)
        item.attributes.update(
            {
                "loopctl.action.gated": started.gated,
                "loopctl.action.approval": as_text(started.approval),
                "loopctl.action.commit": started.commit,
            }
        )
        return TraceBatch()

    def _action_finished(self, run: RunSpans, event: Event, at: int) -> TraceBatch:
        finished = schema.read(schema.ActionFinished, event)
        step = finished.step or 0
        item = run.actions.pop((event.task, step), None)
        if item is None:
            item = self._open_action(run, event, step, at)
        extra = {
            "loopctl.action.url": finished.url,
            "gen_ai.tool.call.result": self._content(finished.detail, keep_end=True),
        }
        span = self._close(run, item, at, extra, None if finished.ok is True else "failed")
        self._forget_if_idle(run)
        return TraceBatch((span,))

    def _point_event(self, run: RunSpans, event: Event, at: int) -> TraceBatch:
        attrs: dict[str, object] = {}
        if event.type == "commit_created":
            made = schema.read(schema.CommitCreated, event)
            attrs = {"loopctl.commit": made.sha, "loopctl.branch": made.branch}
        elif event.type == "inbox_opened":
            opened = schema.inbox_opened(event)
            attrs = {
                "loopctl.inbox.id": opened.id or None,
                "loopctl.inbox.kind": opened.kind,
                "loopctl.inbox.summary": self._content(opened.summary),
            }
        elif event.type == "budget_stopped":
            attrs = {"loopctl.reason": schema.read(schema.BudgetStopped, event).reason}
        self._mark(run, event, at, attrs)
        return TraceBatch()


_Handler = Callable[[TraceBuilder, RunSpans, Event, int], TraceBatch]
_HANDLERS: dict[str, _Handler] = {
    "tick_started": TraceBuilder._tick_started,
    "run_resumed": TraceBuilder._run_resumed,
    "run_interrupted": TraceBuilder._point_event,
    "tasks_listed": TraceBuilder._tasks_listed,
    "task_found": TraceBuilder._task_found,
    "attempt_started": TraceBuilder._attempt_started,
    "agent_finished": TraceBuilder._agent_finished,
    "check_finished": TraceBuilder._check_finished,
    "attempt_finished": TraceBuilder._attempt_finished,
    "task_finished": TraceBuilder._task_finished,
    "tick_finished": TraceBuilder._tick_finished,
    "action_started": TraceBuilder._action_started,
    "action_finished": TraceBuilder._action_finished,
    "commit_created": TraceBuilder._point_event,
    "inbox_opened": TraceBuilder._point_event,
    "budget_stopped": TraceBuilder._point_event,
}


def _messages(role: str, text: str) -> str:
    """A GenAI `*.messages` attribute: one message with one text part, as JSON."""
    message: dict[str, Any] = {"role": role, "parts": [{"type": "text", "content": text}]}
    if role == "assistant":
        message["finish_reason"] = "stop"
    return json.dumps([message], ensure_ascii=False)


def build_trace(
    events: Iterable[Event],
    *,
    capture_content: bool = False,
    redact: Callable[[str], str] = str,
    prompts: PromptReader | None = None,
) -> TraceBatch:
    """Every span and token histogram of `events` (one run or several), open ones closed."""
    builder = TraceBuilder(capture_content=capture_content, redact=redact, prompts=prompts)
    spans: list[SpanRecord] = []
    points: list[HistogramPoint] = []
    for event in [*events, None]:
        batch = builder.feed(event) if event is not None else builder.flush()
        spans.extend(batch.spans)
        points.extend(batch.token_usage)
    return TraceBatch(tuple(spans), tuple(points))
