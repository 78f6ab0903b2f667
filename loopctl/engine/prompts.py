"""The maker's and the judge's prompts, bounded in size however long a loop runs (invariant 6).

Pinned parts (the task, the rules block of `engine.rules`: the agent's instructions, the loop's
rules, protected paths, scope and skill names, under its hash) are never dropped; the
skill index, full skills and earlier attempts share what room is left, newest attempts first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from loopctl.definitions.skills import Skill
from loopctl.engine.rules import RulesBlock, rules_block

MAX_PROMPT_BYTES = 8000
_MAX_TASK_CHARS = 2000
_MAX_FULL_SKILL_CHARS = 1500
_MAX_INDEX_CHARS = 1600
_DETAILED_ATTEMPTS = 2
_MAX_ATTEMPT_TAIL = 700
_MAX_SUMMARY_LINES = 6
_MAX_HUMAN_CHARS = 1200
_MAX_CHANGED_FILES = 40
_MAX_CHANGED_BYTES = 1200
_MAX_PATH_CHARS = 160


@dataclass(frozen=True, slots=True)
class AttemptSummary:
    """What an earlier attempt on this task came to, as the state remembers it."""

    number: int
    verdict: str  # passed | failed | interrupted
    reason: str
    fingerprint: str | None = None
    output_tail: str = ""


@dataclass(frozen=True, slots=True)
class MakerContext:
    task_id: str
    task_prompt: str
    goal: str | None
    check: str | None  # how the goal is checked, shown to the maker; None for a judge
    instructions: str
    rules: Sequence[str]
    protected: Sequence[str]
    scope: Sequence[str]
    skills: Sequence[Skill]  # every available skill (for the index)
    full_skills: Sequence[Skill]  # the loop's chosen skills, given in full
    attempts: Sequence[AttemptSummary]
    attempt_number: int
    # (question, answer) from `loopctl inbox reply`: pinned, like the task itself.
    human: tuple[str, str] | None = None
    # Files the worktree holds changed against the base as this attempt starts (attempts build
    # on each other; nothing is reset), e.g. "calc.py", "old.py (deleted)".
    changed: Sequence[str] = ()
    # The task's declared [scope] as rule lines (definitions.scope.rule_lines), issue 31.
    declared: Sequence[str] = ()

    def rules_block(self) -> RulesBlock:
        """The loop's rules for this maker, as one block with its hash (engine.rules)."""
        return rules_block(
            instructions=self.instructions,
            rules=self.rules,
            protected=self.protected,
            scope=self.scope,
            skills=self.skills,
            declared=self.declared,
        )


def _clip(text: str, limit: int, note: str = "…[cut]") -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: max(limit - len(note), 0)].rstrip() + note


def _tail(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else "[…]" + text[-(limit - 3) :]


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def _skill_index(skills: Sequence[Skill], chosen: set[str], limit: int) -> str:
    lines: list[str] = []
    used = 0
    listed = 0
    others = [s for s in sorted(skills, key=lambda s: s.name) if s.name not in chosen]
    for skill in others:
        line = (
            f"- {skill.name}: {_clip(skill.description, 160)} ({skill.path.parent.name}/SKILL.md)"
        )
        if used + len(line) > limit:
            break
        lines.append(line)
        used += len(line) + 1
        listed += 1
    if listed < len(others):
        lines.append(f"- …and {len(others) - listed} more: run `loopctl skills` to list them")
    return "\n".join(lines)


def _changed_section(changed: Sequence[str], *, listed: bool = True) -> str:
    """The files earlier attempts changed, in at most `_MAX_CHANGED_BYTES` of names whatever
    their number; `listed=False` only counts them."""
    if not changed:
        return ""
    lines: list[str] = []
    used = 0
    for path in changed[: _MAX_CHANGED_FILES if listed else 0]:
        # A file name is the agent's own text: one line each, no control characters.
        shown = "".join(c if c.isprintable() else "?" for c in path)
        line = "- " + _clip(shown, _MAX_PATH_CHARS)
        if used + _size(line) > _MAX_CHANGED_BYTES:
            break
        lines.append(line)
        used += _size(line) + 1
    if len(lines) < len(changed):
        more = len(changed) - len(lines)
        lines.append(f"- {'…and ' if lines else ''}{more} more (`git status` lists them all)")
    return "\n".join(
        [
            "# Files earlier attempts changed",
            "This worktree is not reset between attempts: it still holds their changes against"
            " the base commit. Build on them, or undo what does not help.",
            *lines,
        ]
    )


def _attempts_section(attempts: Sequence[AttemptSummary], limit: int) -> str:
    if not attempts or limit <= 0:
        return ""
    recent = list(attempts[-_DETAILED_ATTEMPTS:])
    older = list(attempts[:-_DETAILED_ATTEMPTS]) if len(attempts) > _DETAILED_ATTEMPTS else []
    parts: list[str] = []
    if older:
        shown = older[-_MAX_SUMMARY_LINES:]
        hidden = len(older) - len(shown)
        if hidden:
            parts.append(f"({hidden} earlier attempts are summarised in .loop/STATE.md)")
        for attempt in shown:
            fp = f" [{attempt.fingerprint}]" if attempt.fingerprint else ""
            parts.append(
                f"- attempt {attempt.number}: {attempt.verdict}{fp}: {_clip(attempt.reason, 140)}"
            )
    for attempt in recent:
        fp = f" (failure fingerprint {attempt.fingerprint})" if attempt.fingerprint else ""
        block = [f"### Attempt {attempt.number}: {attempt.verdict}{fp}", _clip(attempt.reason, 400)]
        if attempt.output_tail.strip():
            block += ["```", _tail(attempt.output_tail, _MAX_ATTEMPT_TAIL), "```"]
        parts.append("\n".join(block))
    text = "\n".join(parts)
    while _size(text) > limit and parts:
        parts.pop(0)  # drop the oldest first; the newest verdict matters most
        text = "\n".join(parts)
    return text


def maker_prompt(ctx: MakerContext, *, max_bytes: int = MAX_PROMPT_BYTES) -> str:
    """Assemble the maker's prompt within `max_bytes` (pinned parts always included)."""
    pinned: list[str] = [
        f"# Task {ctx.task_id} (attempt {ctx.attempt_number})",
        _clip(ctx.task_prompt, _MAX_TASK_CHARS),
    ]
    if ctx.human is not None:
        question, answer = ctx.human
        pinned += ["", "# A human answered your question"]
        if question.strip():
            pinned.append("You asked: " + _clip(question, _MAX_HUMAN_CHARS // 2))
        pinned.append("Answer: " + _clip(answer, _MAX_HUMAN_CHARS))
    if ctx.goal:
        pinned += ["", "# Goal", ctx.goal]
        if ctx.check:
            pinned.append(
                f"loopctl checks it by running `{ctx.check}` in this worktree after your turn;"
                " the check decides when the work is done, not you."
            )
        else:
            pinned.append("A separate checker judges it from your diff after your turn.")
    # The rules go in as one block under its hash marker (engine.rules): byte for byte what
    # the attempt's guard looks for and what the compaction hook prints again.
    pinned += ["", ctx.rules_block().text.rstrip("\n")]
    head = "\n".join(pinned)

    room = max_bytes - _size(head) - 200
    sections: list[str] = []
    changes = _changed_section(ctx.changed)
    if changes and _size(changes) + 2 > room // 2:  # huge pinned parts: a count may be shorter
        changes = min(changes, _changed_section(ctx.changed, listed=False), key=_size)
    if changes:
        sections.append(changes)
        room -= _size(changes) + 2
    skills_at = len(sections)
    chosen = {s.name for s in ctx.full_skills}
    for skill in ctx.full_skills:
        body = _clip(
            skill.instructions(),
            _MAX_FULL_SKILL_CHARS,
            f"…[read the rest: {skill.path.parent.name}/SKILL.md]",
        )
        block = f"## Skill: {skill.name}\n{body}"
        if _size(block) + 2 > room // 2:
            block = (
                f"## Skill: {skill.name}\n{_clip(skill.description, 300)}"
                f" (read {skill.path.parent.name}/SKILL.md)"
            )
        sections.append(block)
        room -= _size(block) + 2
    index = _skill_index(ctx.skills, chosen, min(_MAX_INDEX_CHARS, max(room // 3, 0)))
    if index:
        block = "# Other skills (read a SKILL.md only when it helps)\n" + index
        sections.append(block)
        room -= _size(block) + 2
    history = _attempts_section(ctx.attempts, room - 60)
    if history:
        sections.append("# Earlier attempts on this task\n" + history)
    if sections and ctx.full_skills:
        sections.insert(skills_at, "# Skills for this loop")
    prompt = head + "\n\n" + "\n\n".join(sections) if sections else head
    encoded = prompt.encode("utf-8")
    if len(encoded) > max_bytes:
        # Only reachable when pinned parts alone are huge; keep the head, cut the rest.
        prompt = encoded[:max_bytes].decode("utf-8", "ignore")
    return prompt.rstrip() + "\n"


def judge_prompt(
    *,
    condition: str,
    task_prompt: str,
    instructions: str,
    diff: str,
    check_output: str,
    rules: str = "",
    max_bytes: int = MAX_PROMPT_BYTES,
) -> str:
    """The checker agent's prompt: condition, evidence, and the JSON answer it must give;
    `rules`, the block the maker's prompt carried (engine.task_rules), whole."""
    head = "\n".join(
        [
            "# You are the checker",
            _clip(instructions, 1500) if instructions.strip() else "You did not do this work.",
            "Do not change any file. Decide whether the condition holds for this worktree.",
            "",
            "# Condition",
            _clip(condition, 800),
            "",
            "# The task the maker was given",
            _clip(task_prompt, 800),
            *(["", "# The rules the maker worked under", rules.rstrip("\n")] if rules else []),
            "",
            "# Answer",
            'End with one line of JSON: {"met": true or false, "reason": "one sentence"}',
        ]
    )
    room = max_bytes - _size(head) - 100
    output_part = _tail(check_output, max(room // 3, 200)) if check_output.strip() else "(none)"
    diff_room = room - _size(output_part)
    diff_part = (
        _clip(diff, max(diff_room, 200), "\n…[diff cut]") if diff.strip() else "(no changes)"
    )
    prompt = "\n\n".join(
        [
            head,
            "# Diff against the base commit",
            "```diff\n" + diff_part + "\n```",
            "# Check output",
            "```\n" + output_part + "\n```",
        ]
    )
    encoded = prompt.encode("utf-8")
    if len(encoded) > max_bytes:
        prompt = encoded[:max_bytes].decode("utf-8", "ignore")
    return prompt
