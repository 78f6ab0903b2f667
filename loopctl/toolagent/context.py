"""The conversation of one session, and its compaction near the model's context window.

Pinned, never compacted: the system instructions and the first user message (the task, with
its goal and rules, word for word). Compaction folds the oldest tool turns into a structured
checkpoint (goal, rules, files touched, commands, last failures, where the agent was, next
step) that rides along with the task; the most recent turns stay as they were.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from loopctl.toolagent.wire import AssistantTurn, Message, ToolResult, ToolResults, UserText

# Rough tokens of a text: 4 bytes each is the usual estimate for English and code.
BYTES_PER_TOKEN = 4
COMPACT_AT = 0.7  # compact when a request would fill this share of the window…
COMPACT_TO = 0.45  # …down to this share, so it does not happen again on the next turn
KEEP_RECENT = 2  # turns never folded, however large
_RECENT_OUTPUT_CAP = 4000  # a kept turn's tool output is cut to this when nothing else helps
_SECTION = re.compile(r"^# (.+)$", re.M)


def estimate_tokens(text: str) -> int:
    return (len(text.encode("utf-8")) + BYTES_PER_TOKEN - 1) // BYTES_PER_TOKEN


def sections(prompt: str) -> dict[str, str]:
    """The `# Heading` sections of a prompt loopctl assembled, by lower-case heading."""
    found: dict[str, str] = {}
    matches = list(_SECTION.finditer(prompt))
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(prompt)
        found[match.group(1).strip().lower()] = prompt[match.end() : end].strip()
    return found


@dataclass(slots=True)
class Turn:
    """One model reply with tool calls, and the results of those calls."""

    assistant: AssistantTurn
    results: ToolResults

    def size(self) -> int:
        return estimate_tokens(
            self.assistant.text
            + json.dumps([c.arguments for c in self.assistant.calls], default=str)
            + "".join(r.content for r in self.results.results)
        ) + 16 * (len(self.assistant.calls) + 1)


@dataclass(slots=True)
class Checkpoint:
    """What the folded turns amounted to, kept small and structured."""

    goal: str
    rules: str
    folded_turns: int = 0
    folded_calls: int = 0
    changed: list[str] = field(default_factory=list)
    read: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def fold(self, turn: Turn) -> None:
        self.folded_turns += 1
        if turn.assistant.text.strip():
            self.notes = [*self.notes, _clip(turn.assistant.text, 400)][-2:]
        by_id = {r.call_id: r for r in turn.results.results}
        for call in turn.assistant.calls:
            self.folded_calls += 1
            result = by_id.get(call.id)
            args = call.arguments if isinstance(call.arguments, dict) else {}
            path = args.get("path") if isinstance(args.get("path"), str) else None
            failed = result is None or result.is_error
            if call.name in ("write_file", "edit_file") and path and not failed:
                _remember(self.changed, path, 40)
            elif call.name == "read_file" and path and not failed:
                _remember(self.read, path, 30)
            elif call.name == "run" and result is not None:
                head = result.content.split("\n", 1)[0]
                command = _command(args)
                self.commands = [*self.commands, f"`{command}` → {head}"][-8:]
                if result.is_error:
                    tail = _tail(result.content, 600)
                    self.failures = [*self.failures, f"`{command}` ({head}):\n{tail}"][-3:]

    def render(self) -> str:
        lines = [
            f"# Checkpoint: loopctl compacted {self.folded_turns} earlier turns"
            f" ({self.folded_calls} tool calls) to stay within the context window",
            "",
            "## Goal",
            self.goal or "(see the task above)",
        ]
        if self.rules:
            lines += ["", "## Rules (pinned)", self.rules]
        lines += ["", "## Files changed so far"]
        lines += [f"- {p}" for p in self.changed] or ["- none"]
        if self.read:
            lines += ["", "## Files read", ", ".join(self.read)]
        if self.commands:
            lines += ["", "## Commands run (oldest first)"] + [f"- {c}" for c in self.commands]
        if self.failures:
            lines += ["", "## Last failures"]
            for failure in self.failures:
                head, _, tail = failure.partition("\n")
                lines += [f"- {head}", "```", tail, "```"]
        if self.notes:
            lines += ["", "## Where you were", self.notes[-1]]
        lines += [
            "",
            "## Next step",
            "Carry on from the turns below. Files may have changed since you read them: read a"
            " file again before editing it.",
        ]
        return "\n".join(lines)


def _remember(items: list[str], value: str, limit: int) -> None:
    if value in items:
        items.remove(value)
    items.append(value)
    del items[:-limit]


def _command(args: dict[str, object]) -> str:
    argv = args.get("argv", args.get("command"))
    if isinstance(argv, list):
        return _clip(" ".join(str(a) for a in argv), 160)
    return _clip(str(argv), 160)


def _clip(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _tail(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


@dataclass(slots=True)
class Conversation:
    system: str
    task: str
    checkpoint: Checkpoint | None = None
    turns: list[Turn] = field(default_factory=list)
    compactions: int = 0
    overhead_tokens: int = 0  # tool schemas and request framing

    def messages(self) -> list[Message]:
        first = (
            self.task if self.checkpoint is None else f"{self.task}\n\n{self.checkpoint.render()}"
        )
        out: list[Message] = [UserText(first)]
        for turn in self.turns:
            out += [turn.assistant, turn.results]
        return out

    def add(self, assistant: AssistantTurn, results: list[ToolResult]) -> None:
        self.turns.append(Turn(assistant, ToolResults(tuple(results))))

    def estimate(self) -> int:
        pinned = estimate_tokens(self.system) + estimate_tokens(self.task)
        folded = estimate_tokens(self.checkpoint.render()) if self.checkpoint else 0
        return self.overhead_tokens + pinned + folded + sum(t.size() for t in self.turns)

    def compact_if_needed(self, window: int) -> bool:
        """Fold old turns when the next request would come near `window` tokens."""
        if self.estimate() <= window * COMPACT_AT:
            return False
        target = window * COMPACT_TO
        if self.checkpoint is None:
            found = sections(self.task)
            goal = found.get("goal") or found.get("condition") or _clip(self.task, 300)
            self.checkpoint = Checkpoint(goal=goal, rules=found.get("rules", ""))
        while len(self.turns) > KEEP_RECENT and self.estimate() > target:
            self.checkpoint.fold(self.turns.pop(0))
        if self.estimate() > target:
            # Even the latest turns are too big: keep their shape, cut their tool outputs.
            for turn in self.turns[:-1] or self.turns:
                turn.results = ToolResults(
                    tuple(
                        ToolResult(
                            r.call_id,
                            r.name,
                            _tail(r.content, _RECENT_OUTPUT_CAP) + "\n[cut by loopctl]"
                            if len(r.content) > _RECENT_OUTPUT_CAP
                            else r.content,
                            r.is_error,
                        )
                        for r in turn.results.results
                    )
                )
        self.compactions += 1
        return True
