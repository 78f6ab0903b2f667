"""MCP connectors for loopctl's own agent: connect, list the tools, call them.

The `mcp` SDK is async; loopctl's agent session is not. One background thread runs an event
loop that holds every connector's client open for the whole session; the session's thread
hands it calls and waits for their results with the connector's timeout. Servers are reached
exactly as declared: a stdio command started with only the base environment plus the values
of its own `env_allow`, or a URL with the headers `headers_env` names. Those values are read
here, in loopctl's process, and go nowhere else (callers add them to the redactor).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import re
import threading
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from loopctl.definitions.connectors import Connector, secret_values, server_env, server_headers
from loopctl.errors import LoopctlError, UsageError
from loopctl.secrets import Redactor, build_env

CONNECT_TIMEOUT_S = 30.0
MAX_RESULT_CHARS = 16_000
SEPARATOR = "__"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class ConnectorError(LoopctlError):
    """A connector could not be started or listed; the agent's turn fails with this message."""


def require_sdk() -> None:
    """Fail with one line naming the extra when the `mcp` SDK is not installed."""
    try:
        # lazy: the `mcp` extra, imported only when a connector is used
        import mcp  # noqa: F401
    except ImportError:
        raise UsageError(
            "MCP connectors for backends openai and anthropic need the mcp SDK:"
            " pip install 'mcp>=2.3,<3' (the mcp extra of loopctl-runtime)"
        ) from None


def exposed_name(connector: str, tool: str) -> str:
    """NAME__tool, within the model APIs' [A-Za-z0-9_-]{1,64} rule."""
    return (connector + SEPARATOR + _UNSAFE.sub("_", tool))[:64]


@dataclass(frozen=True, slots=True)
class RemoteTool:
    name: str  # as the model sees it: NAME__tool
    connector: str
    tool: str  # as the server calls it
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolReply:
    text: str
    is_error: bool


def _transport(
    connector: Connector, cwd: Path, source: Mapping[str, str] | None, errlog: TextIO
) -> Any:
    # lazy: the `mcp` extra, imported only when a connector is used
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    if connector.command is not None:
        # Only the base variables (PATH, HOME, LANG, …) and the server's own: the SDK's default
        # environment is merged under ours, and build_env already drops secret-looking names.
        env = {**build_env(source=source), **server_env(connector, source)}
        params = StdioServerParameters(
            command=connector.command[0],
            args=list(connector.command[1:]),
            env=env,
            cwd=str(cwd),
        )
        return stdio_client(params, errlog=errlog)
    # lazy: the `mcp` extra, imported only when a connector is used
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    client = httpx2.AsyncClient(
        headers=server_headers(connector, source),
        timeout=httpx2.Timeout(30.0, read=300.0),
        trust_env=False,
    )
    return streamable_http_client(connector.url or "", http_client=client)


def _describe(result: Any) -> ToolReply:
    parts: list[str] = []
    for block in result.content or []:
        text = getattr(block, "text", None)
        if isinstance(text, str):
            parts.append(text)
        else:
            kind = getattr(block, "type", "content")
            parts.append(f"[{kind} content omitted]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(parts) or "(no output)"
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n[cut at {MAX_RESULT_CHARS} characters]"
    return ToolReply(text, bool(result.is_error))


class ConnectorTools:
    """The declared connectors of one session, connected, with their tools listed."""

    def __init__(
        self,
        connectors: tuple[Connector, ...],
        *,
        cwd: Path,
        source: Mapping[str, str] | None = None,
        log_dir: Path | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self._connectors = {c.name: c for c in connectors}
        self._cwd = cwd
        self._source = source
        self._log_dir = log_dir
        self._redactor = redactor or Redactor(secret_values(connectors, source))
        self._logs: list[tuple[Path | None, TextIO]] = []
        self._clients: dict[str, Any] = {}
        self.tools: dict[str, RemoteTool] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self._ready: concurrent.futures.Future[None] = concurrent.futures.Future()

    # --- lifecycle ------------------------------------------------------------------------------

    def open(self) -> ConnectorTools:
        """Connect every connector and list its tools; ConnectorError when one cannot."""
        require_sdk()
        self._thread = threading.Thread(target=self._serve, name="loopctl-mcp", daemon=True)
        self._thread.start()
        try:
            self._ready.result(timeout=CONNECT_TIMEOUT_S * max(len(self._connectors), 1))
        except concurrent.futures.TimeoutError:
            self.close()
            raise ConnectorError(
                f"connectors did not answer within {CONNECT_TIMEOUT_S:g}s each"
            ) from None
        except ConnectorError:
            self.close()
            raise
        return self

    def close(self) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        for path, handle in self._logs:
            handle.close()
            if path is not None:
                # A server may print what it was given; the log keeps only the redacted text.
                text = path.read_text(encoding="utf-8", errors="replace")
                path.write_text(self._redactor.redact(text), encoding="utf-8")
        self._logs = []

    def _errlog(self, name: str) -> TextIO:
        """Where a stdio server's stderr goes: a file beside the transcript, or nowhere."""
        if self._log_dir is None:
            handle = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
            self._logs.append((None, handle))
            return handle
        self._log_dir.mkdir(parents=True, exist_ok=True)
        path = self._log_dir / f"connector-{name}.err"
        handle = path.open("a", encoding="utf-8")
        self._logs.append((path, handle))
        return handle

    def __enter__(self) -> ConnectorTools:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _serve(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported to open(); the thread must not die silently
            if not self._ready.done():
                self._ready.set_exception(ConnectorError(str(exc)))

    async def _main(self) -> None:

        # lazy: the `mcp` extra, imported only when a connector is used
        from mcp import Client

        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with AsyncExitStack() as stack:
            for name, connector in self._connectors.items():
                try:
                    transport = _transport(connector, self._cwd, self._source, self._errlog(name))
                    client = Client(transport, mode="legacy")
                    self._clients[name] = await stack.enter_async_context(client)
                    listing = await self._clients[name].list_tools()
                except Exception as exc:
                    self._ready.set_exception(
                        ConnectorError(f"connector {name!r} failed to start: {_reason(exc)}")
                    )
                    return
                for tool in listing.tools:
                    exposed = exposed_name(name, tool.name)
                    schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
                    self.tools[exposed] = RemoteTool(
                        name=exposed,
                        connector=name,
                        tool=tool.name,
                        description=f"[{name}] {tool.description or tool.name}"[:1000],
                        parameters=schema or {"type": "object", "properties": {}},
                    )
            self._ready.set_result(None)
            await self._stop.wait()

    # --- calls ----------------------------------------------------------------------------------

    def call(self, exposed: str, arguments: dict[str, Any]) -> ToolReply:
        """Call a listed tool; a failure is an error reply for the model, never an exception."""
        tool = self.tools.get(exposed)
        loop = self._loop
        if tool is None or loop is None:
            return ToolReply(f"no connector tool named {exposed!r}", True)
        client = self._clients[tool.connector]
        timeout = self._connectors[tool.connector].timeout_s
        future = asyncio.run_coroutine_threadsafe(client.call_tool(tool.tool, arguments), loop)
        try:
            return _describe(future.result(timeout=timeout))
        except concurrent.futures.TimeoutError:
            future.cancel()
            return ToolReply(f"{exposed} timed out after {timeout:g}s", True)
        except Exception as exc:
            return ToolReply(f"{exposed} failed: {_reason(exc)}", True)


def _reason(exc: BaseException) -> str:
    """The innermost message of an exception group (anyio wraps task failures in them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
