"""Agent definitions: agents/*.toml, .codex/agents/*.toml and .claude/agents/*.md."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

from loopctl import backend_registry
from loopctl.definitions.connectors import Connector
from loopctl.definitions.fields import Table, did_you_mean
from loopctl.definitions.sandbox import AgentSandbox, SecretHosts, agent_sandbox, secret_hosts
from loopctl.definitions.schema import (
    Field,
    Values,
    accepted,
    boolean,
    command,
    declared,
    duration,
    integer,
    read,
    read_field,
    read_table,
    string,
    strings,
)
from loopctl.definitions.source import Problems, parse_front_matter, parse_toml


class Backend(str):
    """An agent backend's name as agent files write it (`backend = "claude"`).

    The names are those the backends declare (`loopctl.backend_registry`); the constants are
    the built-in ones code branches on. One object per name, so `agent.backend is
    Backend.COMMAND` holds for a loaded agent as it did when this was an enum.
    """

    __slots__ = ()
    _interned: ClassVar[dict[str, Backend]] = {}
    CLAUDE: ClassVar[Backend]
    CODEX: ClassVar[Backend]
    OPENCODE: ClassVar[Backend]
    AIDER: ClassVar[Backend]
    GOOSE: ClassVar[Backend]
    COMMAND: ClassVar[Backend]
    OPENAI: ClassVar[Backend]
    ANTHROPIC: ClassVar[Backend]

    def __new__(cls, name: str) -> Backend:
        known = cls._interned.get(name)
        if known is None:
            known = cls._interned[name] = super().__new__(cls, name)
        return known

    @property
    def value(self) -> str:
        return str(self)


Backend.CLAUDE = Backend("claude")
Backend.CODEX = Backend("codex")
Backend.OPENCODE = Backend("opencode")
Backend.AIDER = Backend("aider")
Backend.GOOSE = Backend("goose")
Backend.COMMAND = Backend("command")
Backend.OPENAI = Backend("openai")
Backend.ANTHROPIC = Backend("anthropic")
# The names above are accepted without asking the registry, which imports every backend module
# (a cold `loopctl validate` would take half as long again); tests/backends/test_backend_registry.py
# checks that each of them is registered.
_BUILT_IN = frozenset(Backend._interned)

HTTP_BACKENDS = (Backend.OPENAI, Backend.ANTHROPIC)
# Backends that can be given MCP connectors (loopctl.backends.connectors, loopctl.toolagent.mcp).
CONNECTOR_BACKENDS = (Backend.CLAUDE, Backend.CODEX, *HTTP_BACKENDS)

# Claude Code's --permission-mode values and Codex's --sandbox values (each CLI's own --help).
PERMISSION_MODES = (
    "default",
    "acceptEdits",
    "plan",
    "auto",
    "dontAsk",
    "bypassPermissions",
    "manual",
)
SANDBOX_MODES = ("read-only", "workspace-write", "danger-full-access")

_AGENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

# A TOML file in an agent folder is read as an agent only when it has one of these keys (or a
# near-miss of one, which is a typo to report): a project may keep its own files in `agents/`
# (`agents/settings.toml`), and those are not loopctl's to reject.
AGENT_MARKER_KEYS = (
    "backend",
    "argv",
    "name",
    "description",
    "developer_instructions",
    "instructions",
)

# Codex reads any of its config keys from a custom-agent file; loopctl accepts them unchanged.
_CODEX_KEYS = (
    "nickname_candidates",
    "model_reasoning_effort",
    "model_reasoning_summary",
    "model_verbosity",
    "sandbox_mode",
    "approval_policy",
    "web_search",
    "mcp_servers",
    "skills",
    "model_provider",
    "profile",
)
# Claude Code sub-agent front-matter fields (Claude Code's sub-agent documentation).
_CLAUDE_KEYS = (
    "tools",
    "disallowedTools",
    "permissionMode",
    "skills",
    "mcpServers",
    "hooks",
    "memory",
    "background",
    "effort",
    "isolation",
    "color",
    "initialPrompt",
)


@dataclass(frozen=True, slots=True)
class Agent:
    """A subagent: which backend runs it, with what instructions and limits."""

    name: str
    path: Path
    backend: Backend
    description: str = ""
    instructions: str = ""
    model: str | None = None
    timeout_s: float = 1200.0
    max_turns: int | None = None
    env_allow: tuple[str, ...] = ()
    argv: tuple[str, ...] | None = None  # backend "command": the program to run
    args: tuple[str, ...] = ()  # extra arguments appended to a preset's argv
    prompt_via: str = "both"  # stdin | file | both
    resume: bool = False
    base_url: str | None = None
    api_key_env: str | None = None
    tools: tuple[str, ...] = ()
    permission_mode: str | None = None
    sandbox_mode: str | None = None  # codex --sandbox
    ask: tuple[str, ...] = ()  # loopctl's own agent: commands that wait for a human's approval
    context_window: int | None = None  # loopctl's own agent: tokens before it compacts
    connectors: tuple[Connector, ...] = ()  # MCP servers from [connectors.NAME] in config.toml
    sandbox: AgentSandbox = field(default_factory=AgentSandbox)  # [sandbox]: extra reach
    # [env.secrets]: the hosts each lent secret is for (beyond the presets), or lent unchanged
    secret_hosts: tuple[SecretHosts, ...] = ()


def _check_name(table: Table, key: str, name: str) -> None:
    if not _AGENT_NAME.match(name):
        table.error(
            key if table.has(key) else None,
            f"agent name {name!r} must be 1-64 characters of letters, digits, '.', '_' or '-',"
            " starting with a letter or digit",
        )


# What a script a command agent runs is called (`node agent.js`); a path with "/" counts too.
_SCRIPT_SUFFIXES = (".py", ".sh", ".bash", ".js", ".mjs", ".cjs", ".ts", ".rb", ".pl", ".php")
_PATH_LIKE = re.compile(r"^[\w.~+@%/-]+$")
_CODE_FLAGS = ("-c", "-e", "-m", "--eval")  # the next argument is code or a module, not a file


def argv_files(argv: Sequence[str]) -> list[str]:
    """The arguments of a command agent's argv that name a file it runs (`tools/agent.py`).

    argv[0] without "/" is a program on PATH; placeholders, options, URLs, code after `-c`
    and anything with spaces or shell characters are not files.
    """
    found: list[str] = []
    for index, arg in enumerate(argv):
        if index > 0 and argv[index - 1] in _CODE_FLAGS:
            continue
        if not _PATH_LIKE.match(arg) or arg.startswith("-") or "//" in arg:
            continue
        if index == 0 and "/" not in arg:
            continue
        if ("/" in arg or arg.endswith(_SCRIPT_SUFFIXES)) and arg not in found:
            found.append(arg)
    return found


def runs_script(arg: str) -> bool:
    """Whether an argv argument is named like a script an interpreter runs (`tools/agent.py`)."""
    return arg.endswith(_SCRIPT_SUFFIXES)


def looks_like_agent(data: Mapping[str, object]) -> bool:
    """Whether a TOML table is meant as an agent: it has a marker key, or a misspelling of one."""
    return any(
        key in AGENT_MARKER_KEYS
        or difflib.get_close_matches(key, AGENT_MARKER_KEYS, n=1, cutoff=0.8)
        for key in data
    )


def _http_url(table: Table, key: str, base_url: str) -> None:
    if not re.match(r"^https?://", base_url):
        table.error(key, f"'{key}' must start with http:// or https://, not {base_url!r}")


# The keys of an agent file, in the order they are read (and their problems reported in): a
# rule across keys that reports before a key is read splits them.
NAME_FIELD = Field("name", string, blank_default=True, check=_check_name)  # default: file stem
# Its choices are the registered backends (`_read_backend` checks them).
BACKEND_FIELD = Field("backend", string)
TEXT_FIELDS = (
    Field("description", string, ""),
    Field("developer_instructions", string, "", attr="instructions"),
)
# Codex's name for developer_instructions; giving both is an error reported before it is read.
INSTRUCTIONS_FIELD = Field("instructions", string, "", if_present=True)
RUN_FIELDS = (
    Field("model", string),
    Field("timeout", duration, 1200.0, attr="timeout_s"),
    Field("max_turns", integer, minimum=1),
)
ENV_FIELDS = (
    Field("allow", strings, attr="env_allow"),
    Field("secrets", secret_hosts, (), attr="secret_hosts"),
)
ARGV_FIELD = Field("argv", command)  # required for backend "command"
LAUNCH_FIELDS = (
    Field("args", strings, single=False),
    Field("prompt_via", string, "both", choices=("stdin", "file", "both")),
    Field("resume", boolean, False),
    Field("base_url", string),
    Field("api_key_env", string),
)
PERMISSION_FIELDS = (
    Field("permission_mode", string, choices=PERMISSION_MODES),
    Field("sandbox_mode", string, choices=SANDBOX_MODES),
    Field("ask", strings),
    Field("context_window", integer, minimum=1000),
)
CONNECTORS_FIELD = Field("connectors", strings, single=False)  # names of [connectors.NAME]
SANDBOX_FIELD = Field("sandbox", agent_sandbox)
CODEX_FIELDS = tuple(Field(key, accepted) for key in _CODEX_KEYS if key != "sandbox_mode")


def load_toml_agent(
    path: Path,
    problems: Problems,
    *,
    default_backend: Backend | None,
    connectors: Mapping[str, Connector] | None = None,
) -> Agent | None:
    """Read a TOML agent; `default_backend` None means the file must say (or give `argv`)."""
    errors_before = len(problems.errors)
    doc = parse_toml(path, problems)
    if doc is None:
        return None
    if not looks_like_agent(doc.data):
        problems.warn(
            path,
            None,
            "not an agent definition (it has none of "
            + ", ".join(AGENT_MARKER_KEYS)
            + "); ignored",
        )
        return None
    table = Table.of(doc, problems)
    name = read_field(table, NAME_FIELD, path.stem)
    backend = _read_backend(table, default_backend)
    if backend is None:
        # Missing or unknown: reported already; don't pile a follow-on "needs argv" error on it.
        return None
    values = _read_agent_keys(table, backend)
    names = read_field(table, CONNECTORS_FIELD, ())
    values["connectors"] = _read_connectors(
        table, names, backend, connectors or {}, values["env_allow"]
    )
    values["sandbox"] = read_field(table, SANDBOX_FIELD, None)
    read(table, CODEX_FIELDS)
    from_codex = default_backend is Backend.CODEX
    table.finish(
        allow_unknown=from_codex,
        unknown_hint=" (kept for Codex, unused by loopctl)" if from_codex else "",
    )
    if len(problems.errors) > errors_before:
        return None
    return Agent(name=name, path=path, backend=backend, **values)


def _read_backend(table: Table, default_backend: Backend | None) -> Backend | None:
    fallback = default_backend or (Backend.COMMAND if table.has("argv") else None)
    if fallback is None and not table.has("backend"):
        table.error(None, "missing 'backend': one of " + ", ".join(backend_registry.names()))
    default = fallback.value if fallback else None
    text = read_field(table, BACKEND_FIELD, default)
    if text is not None and text not in _BUILT_IN:
        names = backend_registry.names()  # loads every backend module: only for other names
        if text not in names:
            where = table.where(BACKEND_FIELD.key)
            table.error(
                BACKEND_FIELD.key,
                f"{where} must be one of {', '.join(names)}, not {text!r}"
                f"{did_you_mean(text, names)}",
            )
            text = default
    return Backend(text) if text is not None else None


def _read_agent_keys(table: Table, backend: Backend) -> Values:
    """Every key after `backend`, with the rules between them, in the order they are read."""
    values = read(table, TEXT_FIELDS)
    if table.has("instructions") and values["instructions"]:
        table.error("instructions", "give 'developer_instructions' or 'instructions', not both")
    values["instructions"] = read_field(table, INSTRUCTIONS_FIELD, values["instructions"])
    values.update(read(table, RUN_FIELDS))
    values.update(read_table(table, "env", ENV_FIELDS) or {"env_allow": (), "secret_hosts": ()})
    # A variable whose hosts are declared is lent: naming it twice would be a chore.
    allowed = values["env_allow"]
    values["env_allow"] = (
        *allowed,
        *(s.name for s in values["secret_hosts"] if s.name not in allowed),
    )
    values["argv"] = read_field(
        table, replace(ARGV_FIELD, required=backend is Backend.COMMAND), None
    )
    if values["argv"] is not None and backend is not Backend.COMMAND:
        table.error("argv", f"'argv' is only for backend = \"command\" (this agent uses {backend})")
    values.update(read(table, LAUNCH_FIELDS))
    if backend in (Backend.OPENAI, Backend.ANTHROPIC) and not values["model"]:
        table.error(None, f"backend {backend} needs a 'model'")
    if values["base_url"] is not None:
        _http_url(table, "base_url", values["base_url"])
    values.update(read(table, PERMISSION_FIELDS))
    if values["ask"] and backend not in HTTP_BACKENDS:
        table.warn(
            "ask",
            "'ask' is enforced by loopctl's own agent (backend openai or anthropic) only;"
            " use the CLI's own permission rules for this backend",
        )
    key_env = values["api_key_env"]
    if key_env is not None and key_env not in values["env_allow"]:
        # The key must reach the backend; listing it once is enough.
        values["env_allow"] = (*values["env_allow"], key_env)
    return values


def _read_connectors(
    table: Table,
    names: tuple[str, ...],
    backend: Backend,
    known: Mapping[str, Connector],
    env_allow: tuple[str, ...],
) -> tuple[Connector, ...]:
    """The connectors named in `connectors`, each one checked against the backend."""
    if names and backend not in CONNECTOR_BACKENDS:
        table.error(
            "connectors",
            f"backend {backend} cannot be given MCP connectors; use one of "
            + ", ".join(b.value for b in CONNECTOR_BACKENDS),
        )
        return ()
    found: list[Connector] = []
    for name in names:
        connector = known.get(name)
        if connector is None:
            listed = ", ".join(sorted(known)) or "none"
            table.error(
                "connectors",
                f"unknown connector {name!r}{did_you_mean(name, known)} ([connectors.NAME] in"
                f" .loop/config.toml defines: {listed})",
            )
            continue
        if connector.headers_env and backend not in HTTP_BACKENDS:
            table.error(
                "connectors",
                f"connector {name!r} sends headers from headers_env, which {backend} would have"
                " to hold itself; use it with backend openai or anthropic, or put the server"
                " behind a stdio command",
            )
            continue
        shared = sorted(set(connector.variables) & set(env_allow))
        if shared:
            table.warn(
                "connectors",
                f"{', '.join(shared)} is in this agent's env.allow too, so the agent sees what"
                f" only connector {name!r} needs; remove it from env.allow",
            )
        if connector not in found:
            found.append(connector)
    return tuple(found)


def _claude_tools(table: Table, field: Field, default: tuple[str, ...]) -> tuple[str, ...]:
    """`tools`: a comma-separated string (Claude Code's form) or a list of tool names."""
    tools = table.raw(field.key)
    if isinstance(tools, str):
        return tuple(t.strip() for t in tools.split(",") if t.strip())
    if isinstance(tools, list) and all(isinstance(t, str) for t in tools):
        return tuple(tools)
    if tools is not None:
        table.error(field.key, "'tools' must be a comma-separated string or a list of tool names")
    return default


# The front matter of a Claude Code sub-agent, in the order it is read.
CLAUDE_FIELDS = (
    NAME_FIELD,
    Field("description", string, "", required=True, max_len=4096),
    Field("model", string),
    Field("maxTurns", integer, minimum=1, attr="max_turns"),
    Field("tools", _claude_tools, ()),
    Field("permissionMode", string, attr="permission_mode"),
)
CLAUDE_ACCEPTED = tuple(
    Field(key, accepted) for key in _CLAUDE_KEYS if key not in declared(CLAUDE_FIELDS)
)


def load_claude_agent(path: Path, problems: Problems) -> Agent | None:
    errors_before = len(problems.errors)
    doc = parse_front_matter(path, problems)
    if doc is None:
        return None
    table = Table.of(doc, problems)
    values = read(table, CLAUDE_FIELDS, name=path.stem)
    read(table, CLAUDE_ACCEPTED)
    if values["model"] == "inherit":
        values["model"] = None
    table.finish(allow_unknown=True, unknown_hint=" (not a Claude Code sub-agent field)")
    if len(problems.errors) > errors_before:
        return None
    return Agent(
        path=path,
        backend=Backend.CLAUDE,
        instructions=doc.body.strip(),
        **values,
    )
