"""Agent definitions: agents/*.toml, .codex/agents/*.toml and .claude/agents/*.md."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from loopctl.definitions.connectors import Connector
from loopctl.definitions.fields import Table, did_you_mean
from loopctl.definitions.sandbox import (
    AgentSandbox,
    SecretHosts,
    read_agent_sandbox,
    read_secret_hosts,
)
from loopctl.definitions.source import Problems, parse_front_matter, parse_toml


class Backend(StrEnum):
    CLAUDE = "claude"
    CODEX = "codex"
    OPENCODE = "opencode"
    AIDER = "aider"
    GOOSE = "goose"
    COMMAND = "command"
    OPENAI = "openai"
    ANTHROPIC = "anthropic"


CLI_BACKENDS = (Backend.CLAUDE, Backend.CODEX, Backend.OPENCODE, Backend.AIDER, Backend.GOOSE)
HTTP_BACKENDS = (Backend.OPENAI, Backend.ANTHROPIC)
# Backends that can be given MCP connectors (loopctl.connectors, loopctl.mcp_tools).
CONNECTOR_BACKENDS = (Backend.CLAUDE, Backend.CODEX, *HTTP_BACKENDS)

# Claude Code's --permission-mode values and Codex's --sandbox values (agent-clis.md §1.7, §2.2).
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
# Claude Code sub-agent front-matter fields (docs/sub-agents.md).
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


def _check_name(name: str, table: Table, key: str | None) -> bool:
    if not _AGENT_NAME.match(name):
        table.error(
            key,
            f"agent name {name!r} must be 1-64 characters of letters, digits, '.', '_' or '-',"
            " starting with a letter or digit",
        )
        return False
    return True


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
    from_codex = default_backend is Backend.CODEX
    name = table.string("name", path.stem) or path.stem
    _check_name(name, table, "name" if table.has("name") else None)
    fallback = default_backend or (Backend.COMMAND if table.has("argv") else None)
    if fallback is None and not table.has("backend"):
        table.error(None, "missing 'backend': one of " + ", ".join(b.value for b in Backend))
    backend_text = table.string(
        "backend", fallback.value if fallback else None, choices=[b.value for b in Backend]
    )
    if backend_text is None:
        # Missing or unknown: reported above; don't pile a follow-on "needs argv" error on it.
        return None
    backend = Backend(backend_text)
    description = table.string("description", "") or ""
    instructions = table.string("developer_instructions", "") or ""
    if table.has("instructions"):
        if instructions:
            table.error("instructions", "give 'developer_instructions' or 'instructions', not both")
        instructions = table.string("instructions", "") or ""
    model = table.string("model")
    timeout_s = table.duration("timeout", 1200.0) or 1200.0
    max_turns = table.integer("max_turns", None, minimum=1)
    env = table.table("env")
    env_allow: tuple[str, ...] = ()
    secret_hosts: tuple[SecretHosts, ...] = ()
    if env is not None:
        env_allow = env.string_list("allow")
        secret_hosts = read_secret_hosts(env.table("secrets"))
        env.finish()
    # A variable whose hosts are declared is lent: naming it twice would be a chore.
    env_allow = (*env_allow, *(s.name for s in secret_hosts if s.name not in env_allow))
    argv = table.argv("argv", required=backend is Backend.COMMAND)
    if argv is not None and backend is not Backend.COMMAND:
        table.error("argv", f"'argv' is only for backend = \"command\" (this agent uses {backend})")
    args = table.string_list("args", allow_single=False)
    prompt_via = table.string("prompt_via", "both", choices=("stdin", "file", "both")) or "both"
    resume = table.boolean("resume", False)
    base_url = table.string("base_url")
    api_key_env = table.string("api_key_env")
    if backend in (Backend.OPENAI, Backend.ANTHROPIC) and not model:
        table.error(None, f"backend {backend} needs a 'model'")
    if base_url is not None and not re.match(r"^https?://", base_url):
        table.error("base_url", f"'base_url' must start with http:// or https://, not {base_url!r}")
    permission_mode = table.string("permission_mode", choices=PERMISSION_MODES)
    sandbox_mode = table.string("sandbox_mode", choices=SANDBOX_MODES)
    ask = table.string_list("ask")
    context_window = table.integer("context_window", None, minimum=1000)
    if ask and backend not in HTTP_BACKENDS:
        table.warn(
            "ask",
            "'ask' is enforced by loopctl's own agent (backend openai or anthropic) only;"
            " use the CLI's own permission rules for this backend",
        )
    if api_key_env is not None and api_key_env not in env_allow:
        # The key must reach the backend; listing it once is enough.
        env_allow = (*env_allow, api_key_env)
    used = _read_connectors(table, backend, connectors or {}, env_allow)
    sandbox = read_agent_sandbox(table.table("sandbox"))
    table.known(*(k for k in _CODEX_KEYS if k != "sandbox_mode"))
    table.finish(
        allow_unknown=from_codex,
        unknown_hint=" (kept for Codex, unused by loopctl)" if from_codex else "",
    )
    if len(problems.errors) > errors_before:
        return None
    return Agent(
        name=name,
        path=path,
        backend=backend,
        description=description,
        instructions=instructions,
        model=model,
        timeout_s=timeout_s,
        max_turns=max_turns,
        env_allow=env_allow,
        argv=argv,
        args=args,
        prompt_via=prompt_via,
        resume=resume,
        base_url=base_url,
        api_key_env=api_key_env,
        permission_mode=permission_mode,
        sandbox_mode=sandbox_mode,
        ask=ask,
        context_window=context_window,
        connectors=used,
        sandbox=sandbox,
        secret_hosts=secret_hosts,
    )


def _read_connectors(
    table: Table, backend: Backend, known: Mapping[str, Connector], env_allow: tuple[str, ...]
) -> tuple[Connector, ...]:
    names = table.string_list("connectors", allow_single=False)
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


def load_claude_agent(path: Path, problems: Problems) -> Agent | None:
    errors_before = len(problems.errors)
    doc = parse_front_matter(path, problems)
    if doc is None:
        return None
    table = Table.of(doc, problems)
    name = table.string("name", path.stem) or path.stem
    _check_name(name, table, "name" if table.has("name") else None)
    description = table.string("description", required=True, max_len=4096) or ""
    model = table.string("model")
    if model == "inherit":
        model = None
    max_turns = table.integer("maxTurns", None, minimum=1)
    tools_raw = table.raw("tools")
    tools: tuple[str, ...] = ()
    if isinstance(tools_raw, str):
        tools = tuple(t.strip() for t in tools_raw.split(",") if t.strip())
    elif isinstance(tools_raw, list) and all(isinstance(t, str) for t in tools_raw):
        tools = tuple(tools_raw)
    elif tools_raw is not None:
        table.error("tools", "'tools' must be a comma-separated string or a list of tool names")
    permission_mode = table.string("permissionMode")
    table.known(*_CLAUDE_KEYS)
    table.finish(allow_unknown=True, unknown_hint=" (not a Claude Code sub-agent field)")
    if len(problems.errors) > errors_before:
        return None
    return Agent(
        name=name,
        path=path,
        backend=Backend.CLAUDE,
        description=description,
        instructions=doc.body.strip(),
        model=model,
        max_turns=max_turns,
        tools=tools,
        permission_mode=permission_mode,
    )
