"""The loop's rules given again to a CLI after it compacts its own context (issue 31, item 2).

Claude Code summarises a long conversation when its context fills up ("compaction"), and the
summary may drop the rules the prompt carried. Its own remedy is a `SessionStart` hook with the
`compact` matcher: what the hook prints is added to the context of the compacted session (and,
with `resume`, of a resumed one). loopctl writes that hook into a settings file of the turn's
own, given with `--settings` (merged with the CLI's other settings, never written into them):
the command prints the rules file beside it, and nothing else — the only text a shell sees is
loopctl's quoted path, never the rules themselves. Both files sit in the attempt folder, which
the sandboxed agent can read but not write.

Whether the block arrived is read from the CLI's stream (`--output-format stream-json
--verbose`): each `compact_boundary` event must be matched by a `SessionStart:compact` hook
response whose output carries the block's marker; one that is not is reported, and the engine
records a warning note. Codex runs only hooks a user has reviewed and trusted, and `codex exec`
skips the others silently, so for Codex the rules travel in every prompt only.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from loopctl.backends.base import AgentRequest
from loopctl.backends.presets import json_lines

# After a compaction, and when a session is resumed (its earlier context may be a summary).
MATCHER = "compact|resume"


def files(request: AgentRequest) -> tuple[Path, Path]:
    """The turn's rules file and its Claude Code settings file, beside its logs."""
    folder = request.stdout_path.parent
    return folder / f"{request.role}-rules.md", folder / f"{request.role}-claude-settings.json"


def hook_command(rules_file: Path) -> str:
    """The hook's command line: `cat` of loopctl's own file, its path quoted for the shell
    Claude Code runs hook commands with."""
    return f"cat -- {shlex.quote(str(rules_file))}"


def settings(rules_file: Path) -> dict[str, object]:
    """Claude Code settings holding the one hook."""
    hook = {"type": "command", "command": hook_command(rules_file), "timeout": 30}
    return {"hooks": {"SessionStart": [{"matcher": MATCHER, "hooks": [hook]}]}}


def claude_args(request: AgentRequest) -> list[str]:
    """`--settings FILE` with the rules hook ([] for a turn without rules: a checker)."""
    if not request.rules:
        return []
    rules_file, settings_file = files(request)
    _write_new(rules_file, request.rules)
    _write_new(settings_file, json.dumps(settings(rules_file), indent=2) + "\n")
    return ["--settings", str(settings_file)]


def _write_new(path: Path, text: str) -> None:
    """`path` created afresh (a link left in its place is replaced, never followed)."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


@dataclass(frozen=True, slots=True)
class Arrival:
    """What a turn's stream shows of compactions and of the rules given again."""

    compactions: int = 0
    reinjected: int = 0  # `SessionStart:compact` hook responses that carried the marker
    missed: int = 0  # compactions not followed by the rules

    def warning(self) -> str:
        if not self.missed:
            return ""
        return (
            f"{self.missed} of {self.compactions} compaction(s) were not followed by the loop's"
            " rules: the CLI's compaction hook did not run or printed something else (a"
            " `--settings` or `disableAllHooks` in the agent's args or its own settings?)"
        )


def arrival(stdout: str, marker: str) -> Arrival:
    """The compactions in a Claude Code stream-json `stdout`, and how many were followed by
    the block marked `marker`: counted, not paired by position, as the stream may report the
    hook's response on either side of its `compact_boundary`."""
    compactions = reinjected = 0
    for event in json_lines(stdout):
        if event.get("type") != "system":
            continue
        subtype = event.get("subtype")
        if subtype == "compact_boundary":
            compactions += 1
        elif subtype == "hook_response" and event.get("hook_name") == "SessionStart:compact":
            output = f"{event.get('output') or ''}{event.get('stdout') or ''}"
            if marker and marker in output:
                reinjected += 1
    return Arrival(compactions, reinjected, max(compactions - reinjected, 0))
