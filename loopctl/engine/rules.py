"""The loop's rules as one versioned block with a hash (issue 31, item 2).

A long agent turn forgets: a CLI that compacts its own context summarises the prompt, and the
rules in it may not survive the summary ("governance decay"). So the rules are one stable block
of text — the agent's instructions, the loop's `rules`, the protected paths, the maker's scope,
the skill index — under a marker that carries its sha256. Every maker prompt carries the block
verbatim; the attempt refuses to start when its composed prompt lacks the current marker
(`engine.attempt`); a CLI that compacts is given the block again through its own mechanism
(`backends.rules_hook`); and the hash is journaled with each attempt, so which rules an
attempt ran under is on record.

The block depends only on the definitions, never on the attempt (no attempt number, no
history): the same definitions give the same hash, and a changed rule gives a new one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from loopctl.definitions.proposals import PROPOSAL_DIR, holds_definitions, is_definition
from loopctl.definitions.skills import Skill

# Bumped when the block's layout changes, so an old hash is never mistaken for a new one.
RULES_VERSION = 1
MARKER_PREFIX = "loopctl-rules"
_MAX_RULES_CHARS = 2500
_MAX_SKILL_NAMES_CHARS = 600
# The protected path every loop that may not edit itself has (checks.verdicts.self_edit_paths).
SELF_EDIT = ".loop/**"


@dataclass(frozen=True, slots=True)
class RulesBlock:
    """The rules text, its version and the sha256 of `body`."""

    body: str
    version: int
    sha256: str

    @property
    def marker(self) -> str:
        """The line that names this block: what a prompt, a hook's output or a stream is
        searched for."""
        return f"{MARKER_PREFIX} v{self.version} sha256:{self.sha256}"

    @property
    def text(self) -> str:
        """The block as a prompt carries it (and as the compaction hook prints it)."""
        return f"# Rules ({self.marker})\n{self.body}\n"

    def carried_by(self, prompt: str) -> bool:
        """Whether `prompt` holds this block whole: its marker and its exact text."""
        return self.text in prompt


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    note = "…[cut]"
    return text if len(text) <= limit else text[: limit - len(note)].rstrip() + note


def _skill_names(skills: Sequence[Skill], limit: int) -> str:
    names = sorted({skill.name for skill in skills})
    shown: list[str] = []
    used = 0
    for name in names:
        if used + len(name) + 2 > limit:
            break
        shown.append(name)
        used += len(name) + 2
    if not shown:
        return ""
    more = len(names) - len(shown)
    tail = f", …and {more} more (`loopctl skills` lists them)" if more else ""
    return (
        "- Skills you may read when one helps (skills/<name>/SKILL.md): " + ", ".join(shown) + tail
    )


def _a_definition(pattern: str) -> bool:
    """Whether a protected path is one of the definitions (`.loop/**`, an agent's file, a
    skill's folder), which a maker proposes rather than fails on."""
    stem = pattern.removesuffix("/**")
    return pattern == SELF_EDIT or is_definition(stem) or holds_definitions(stem)


def rules_block(
    *,
    instructions: str,
    rules: Sequence[str],
    protected: Sequence[str],
    scope: Sequence[str],
    skills: Sequence[Skill] = (),
    declared: Sequence[str] = (),
) -> RulesBlock:
    """The block for a maker with these instructions under a loop with these rules, protected
    paths, scope, declared `[scope]` (its rule lines, definitions.scope.rule_lines) and skills;
    bounded in size like the prompt it goes into (invariant 6)."""
    lines: list[str] = []
    if instructions.strip():
        lines.append(instructions.strip())
    lines += [f"- {rule}" for rule in rules]
    # Invariant 10: the loop's own definitions are proposed, not written (engine.proposals).
    proposing = SELF_EDIT in protected
    kept = [p for p in protected if not (proposing and _a_definition(p))]
    if kept:
        lines.append("- Do not change these paths (a change fails the attempt): " + ", ".join(kept))
    if proposing:
        lines.append(
            f"- Never edit this loop's definitions ({SELF_EDIT}, agents, skills): an edit is taken"
            f" out of your work. To change them, write {PROPOSAL_DIR}/<slug>.md: why, then a"
            " unified diff in a ```diff block; a human decides."
        )
    if scope:
        lines.append("- Change only files matching: " + ", ".join(scope))
    lines += declared
    lines.append("- Work only inside this worktree. Do not commit; loopctl commits what passes.")
    lines.append(
        '- If only a human can decide how to go on, end with one JSON line {"escalate": "…?"}.'
    )
    index = _skill_names(skills, _MAX_SKILL_NAMES_CHARS)
    if index:
        lines.append(index)
    body = _clip("\n".join(lines), _MAX_RULES_CHARS)
    digest = hashlib.sha256(f"v{RULES_VERSION}\n{body}".encode()).hexdigest()
    return RulesBlock(body=body, version=RULES_VERSION, sha256=digest)
