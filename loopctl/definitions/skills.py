"""Skills in the Agent Skills format: a folder holding SKILL.md with YAML front matter."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from loopctl.definitions.fields import Table
from loopctl.definitions.source import Problems, parse_front_matter

SKILL_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_STANDARD_KEYS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
# Claude Code accepts these as well; other tools reject them, so they warn instead of failing.
_CLAUDE_EXTRA_KEYS = (
    "when_to_use",
    "argument-hint",
    "arguments",
    "disable-model-invocation",
    "user-invocable",
    "disallowed-tools",
    "model",
    "effort",
    "context",
    "agent",
    "background",
    "hooks",
    "paths",
    "shell",
    "version",
)


@dataclass(frozen=True, slots=True)
class Skill:
    """A skill: its index entry (name, description) and where its instructions live."""

    name: str
    description: str
    path: Path  # the SKILL.md file
    license: str | None = None
    compatibility: str | None = None
    allowed_tools: tuple[str, ...] = ()
    metadata: tuple[tuple[str, str], ...] = ()

    @property
    def folder(self) -> Path:
        return self.path.parent

    def instructions(self) -> str:
        """The body after the front matter, read on demand (progressive disclosure)."""
        problems = Problems()
        doc = parse_front_matter(self.path, problems)
        return doc.body.strip() if doc is not None else ""


def load_skill(path: Path, problems: Problems) -> Skill | None:
    doc = parse_front_matter(path, problems)
    if doc is None:
        return None
    table = Table.of(doc, problems)
    folder = path.parent.name
    name = table.string("name") or ""
    if not table.has("name"):
        # Claude Code names such a skill after its folder; loopctl does the same, but the
        # Agent Skills format (and so every other agent) requires the key.
        if SKILL_NAME.match(folder) and len(folder) <= 64:
            name = folder
            table.warn(
                None,
                f"no 'name': named {folder!r} after its folder, as Claude Code does;"
                f" other agents need `name: {folder}` in the front matter",
            )
        else:
            table.error(
                None,
                f"missing required key 'name', and the folder name {folder!r} is not a valid"
                " skill name (lowercase letters, digits and single hyphens)",
            )
    elif isinstance(table.data.get("name"), str) and not name:
        table.error("name", f"'name' is empty; use the folder name: `name: {folder}`")
    elif name:
        if len(name) > 64:
            table.error("name", f"skill name is {len(name)} characters; at most 64")
        elif not SKILL_NAME.match(name):
            table.error(
                "name",
                f"skill name {name!r} must be lowercase letters, digits and single hyphens"
                " (no leading, trailing or double hyphen)",
            )
        elif name != folder:
            table.error("name", f"skill name {name!r} must equal its folder name {folder!r}")
    description = table.string("description", required=True) or ""
    if table.has("description") and isinstance(table.data.get("description"), str):
        if not description.strip():
            table.error("description", "'description' is empty; say what the skill does and when")
        elif len(description) > 1024:
            table.error(
                "description", f"'description' is {len(description)} characters; at most 1024"
            )
    license_ = table.string("license")
    compatibility = table.string("compatibility", max_len=500)
    allowed = table.raw("allowed-tools")
    allowed_tools: tuple[str, ...] = ()
    if isinstance(allowed, str):
        allowed_tools = tuple(allowed.split())
    elif isinstance(allowed, list) and all(isinstance(t, str) for t in allowed):
        allowed_tools = tuple(allowed)
    elif allowed is not None:
        table.error("allowed-tools", "'allowed-tools' must be a space-separated string of tools")
    metadata_raw = table.raw("metadata")
    metadata: tuple[tuple[str, str], ...] = ()
    if isinstance(metadata_raw, dict):
        if all(
            isinstance(k, str) and isinstance(v, str | int | float) for k, v in metadata_raw.items()
        ):
            metadata = tuple((k, str(v)) for k, v in metadata_raw.items())
        else:
            table.error("metadata", "'metadata' must map strings to strings")
    elif metadata_raw is not None:
        table.error("metadata", "'metadata' must be a mapping of strings to strings")
    for key in doc.data:
        if key in _CLAUDE_EXTRA_KEYS:
            table.warn(key, f"'{key}' is a Claude Code extension; other agents ignore it")
    table.known(*_STANDARD_KEYS, *_CLAUDE_EXTRA_KEYS)
    table.finish(unknown_hint=f"; the Agent Skills format allows only {', '.join(_STANDARD_KEYS)}")
    if table.failed:
        return None
    return Skill(
        name=name,
        description=description.strip(),
        path=path,
        license=license_,
        compatibility=compatibility,
        allowed_tools=allowed_tools,
        metadata=metadata,
    )
