"""Skills in the Agent Skills format: a folder holding SKILL.md with YAML front matter."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from loopctl.definitions.fields import Table
from loopctl.definitions.schema import Field, accepted, read, read_field, string
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


def _description(table: Table, key: str, description: str) -> None:
    if not isinstance(table.data.get(key), str):
        return  # missing or not a string: reported by the reader
    if not description.strip():
        table.error(key, "'description' is empty; say what the skill does and when")
    elif len(description) > 1024:
        table.error(key, f"'description' is {len(description)} characters; at most 1024")


def _tools(table: Table, field: Field, default: tuple[str, ...]) -> tuple[str, ...]:
    """`allowed-tools`: a space-separated string (the format's form) or a list."""
    allowed = table.raw(field.key)
    if isinstance(allowed, str):
        return tuple(allowed.split())
    if isinstance(allowed, list) and all(isinstance(t, str) for t in allowed):
        return tuple(allowed)
    if allowed is not None:
        table.error(field.key, "'allowed-tools' must be a space-separated string of tools")
    return default


def _metadata(
    table: Table, field: Field, default: tuple[tuple[str, str], ...]
) -> tuple[tuple[str, str], ...]:
    metadata = table.raw(field.key)
    if isinstance(metadata, dict):
        if all(
            isinstance(k, str) and isinstance(v, str | int | float) for k, v in metadata.items()
        ):
            return tuple((k, str(v)) for k, v in metadata.items())
        table.error(field.key, "'metadata' must map strings to strings")
    elif metadata is not None:
        table.error(field.key, "'metadata' must be a mapping of strings to strings")
    return default


# The keys of SKILL.md's front matter, in the order they are read; `name` first, on its own.
NAME_FIELD = Field("name", string, "")
SKILL_FIELDS = (
    Field("description", string, "", required=True, check=_description),
    Field("license", string),
    Field("compatibility", string, max_len=500),
    Field("allowed-tools", _tools, ()),
    Field("metadata", _metadata, ()),
    *(Field(key, accepted) for key in _CLAUDE_EXTRA_KEYS),
)


def _skill_name(table: Table, name: str, folder: str) -> str:
    """The skill's name: its own, which must equal its folder's, or (absent) the folder's."""
    if not table.has("name"):
        # Claude Code names such a skill after its folder; loopctl does the same, but the
        # Agent Skills format (and so every other agent) requires the key.
        if SKILL_NAME.match(folder) and len(folder) <= 64:
            table.warn(
                None,
                f"no 'name': named {folder!r} after its folder, as Claude Code does;"
                f" other agents need `name: {folder}` in the front matter",
            )
            return folder
        table.error(
            None,
            f"missing required key 'name', and the folder name {folder!r} is not a valid"
            " skill name (lowercase letters, digits and single hyphens)",
        )
    elif isinstance(table.data.get("name"), str) and not name:
        table.error("name", f"'name' is empty; use the folder name: `name: {folder}`")
    elif len(name) > 64:
        table.error("name", f"skill name is {len(name)} characters; at most 64")
    elif name and not SKILL_NAME.match(name):
        table.error(
            "name",
            f"skill name {name!r} must be lowercase letters, digits and single hyphens"
            " (no leading, trailing or double hyphen)",
        )
    elif name and name != folder:
        table.error("name", f"skill name {name!r} must equal its folder name {folder!r}")
    return name


def load_skill(path: Path, problems: Problems) -> Skill | None:
    doc = parse_front_matter(path, problems)
    if doc is None:
        return None
    table = Table.of(doc, problems)
    name = _skill_name(table, read_field(table, NAME_FIELD, ""), path.parent.name)
    values = read(table, SKILL_FIELDS)
    for key in doc.data:
        if key in _CLAUDE_EXTRA_KEYS:
            table.warn(key, f"'{key}' is a Claude Code extension; other agents ignore it")
    table.finish(unknown_hint=f"; the Agent Skills format allows only {', '.join(_STANDARD_KEYS)}")
    if table.failed:
        return None
    return Skill(
        name=name,
        description=values["description"].strip(),
        path=path,
        license=values["license"],
        compatibility=values["compatibility"],
        allowed_tools=values["allowed_tools"],
        metadata=values["metadata"],
    )
