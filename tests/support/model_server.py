"""A scripted model server: the three wire formats coding agents speak, on 127.0.0.1.

It answers Anthropic Messages (`/v1/messages`), OpenAI Responses (`/v1/responses`) and OpenAI
Chat Completions (`/v1/chat/completions`), as server-sent events when the client asks for a
stream and as plain JSON otherwise. A script decides each answer from the request: a `Turn`
(text and tool calls, rendered in the client's own format, with usage) or a raw `Reply` (a 401,
a 429, or a hang). Replies queued in `queue` are served first, whatever the script says.

Every request is recorded; headers that carry credentials are kept only as a hash, so a test can
check which key arrived without the key itself being written anywhere.

Used in-process by the tests of loopctl's own `openai`/`anthropic` backends, and by
`real_cli_harness.py`, which runs it inside a loopback-only network namespace beside a real CLI.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# Tool-call ids must be unique within a conversation (Claude Code retries a turn that reuses one).
_IDS = itertools.count(1)
SECRET_HEADER = re.compile(r"key|token|secret|auth|cookie", re.I)


def secret_digest(value: str) -> str:
    """How a credential header is recorded: a short sha256, enough to tell keys apart."""
    return "sha256:" + hashlib.sha256(value.encode()).hexdigest()[:16]


@dataclass
class Reply:
    """A raw HTTP answer: an error status, a fixed body, or (hang=True) no answer at all."""

    status: int = 200
    body: Any = None  # dict → JSON; str → sent as is
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False  # hold the connection open until the server stops


@dataclass
class Call:
    """A tool call. `args` is a JSON object, or a string for a freeform (custom) tool."""

    name: str
    args: dict[str, Any] | str


@dataclass
class Turn:
    """One model turn, rendered in whichever wire format the client used."""

    text: str = ""
    calls: list[Call] = field(default_factory=list)
    usage: tuple[int, int] = (100, 20)  # input, output tokens
    cached: int = 0  # of the input tokens, served from a prompt cache


@dataclass
class Request:
    """What a script sees of one model request."""

    wire: str  # anthropic | responses | chat
    path: str
    body: dict[str, Any]
    headers: dict[str, str]

    @property
    def stream(self) -> bool:
        return self.body.get("stream") is True

    @property
    def tools(self) -> list[str]:
        names = []
        for tool in self.body.get("tools") or []:
            if not isinstance(tool, dict):
                continue
            function = tool.get("function")
            name = function.get("name") if isinstance(function, dict) else tool.get("name")
            if isinstance(name, str):
                names.append(name)
        return names

    @property
    def text(self) -> str:
        """The whole request body as text, for looking things up in prompts."""
        return json.dumps(self.body)

    @property
    def step(self) -> int:
        """How many tool results the conversation already holds: the script's position."""
        return len(self.tool_results)

    @property
    def tool_results(self) -> list[str]:
        found: list[str] = []
        if self.wire == "responses":
            for item in self.body.get("input") or []:
                if isinstance(item, dict) and str(item.get("type", "")).endswith("call_output"):
                    found.append(str(item.get("output")))
            return found
        for message in self.body.get("messages") or []:
            if message.get("role") == "tool":
                found.append(str(message.get("content")))
            content = message.get("content")
            if message.get("role") == "user" and isinstance(content, list):
                found += [
                    str(block.get("content"))
                    for block in content
                    if isinstance(block, dict) and block.get("type") == "tool_result"
                ]
        return found

    @property
    def cwd(self) -> str | None:
        """The working directory the client told the model about, if it did."""
        for pattern in (
            r"Primary working directory: ([^\s\\]+)",
            r"Working directory: ([^\s\\]+)",
            r"<cwd>([^<]+)</cwd>",
        ):
            found = re.search(pattern, self.text)
            if found:
                return found.group(1)
        return None


Script = Callable[[Request, "ScriptedModelServer"], "Turn | Reply"]


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes
    status: int = 0
    usage: tuple[int, int] | None = None  # the (input, output) tokens its answer reported

    @property
    def request(self) -> Request:
        body = self.body if isinstance(self.body, dict) else {}
        return Request(wire_of(self.path) or "chat", self.path, body, self.headers)

    def record(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "path": self.path,
            "headers": self.headers,
            "body": self.body,
            "status": self.status,
            "usage": list(self.usage) if self.usage else None,
        }


def wire_of(path: str) -> str | None:
    route = path.split("?", 1)[0]
    if route.endswith("/messages"):
        return "anthropic"
    if route.endswith("/responses"):
        return "responses"
    if route.endswith("/chat/completions"):
        return "chat"
    return None


class ScriptedModelServer:
    """A real HTTP server on 127.0.0.1 (port 0: any free one) that plays `script`."""

    def __init__(self, script: Script | None = None, *, port: int = 0) -> None:
        self.script = script
        self.queue: list[Reply] = []
        self.seen: list[Seen] = []
        self.models = ["gpt-test", "claude-test"]
        self.key: str | None = None  # when set, requests must carry it
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def posts(self) -> list[Seen]:
        return [s for s in self.seen if s.body is not None]

    def answer(self, request: Request) -> Turn | Reply:
        with self.lock:
            queued = self.queue.pop(0) if self.queue else None
        if queued is not None:
            return queued
        if not self.key_ok(request.headers):
            return Reply(401, {"error": {"message": "invalid api key", "type": "auth"}})
        if self.script is None:
            return Reply(500, {"error": {"message": "no script"}})
        return self.script(request, self)

    def key_ok(self, headers: dict[str, str]) -> bool:
        if self.key is None:
            return True
        lowered = {k.lower(): v for k, v in headers.items()}
        given = lowered.get("x-api-key") or lowered.get("authorization", "").removeprefix("Bearer ")
        return given == self.key

    def start(self) -> ScriptedModelServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()  # release hung requests first
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _recorded_headers(headers: Any) -> dict[str, str]:
    return {
        key.lower(): secret_digest(value) if SECRET_HEADER.search(key) else value
        for key, value in headers.items()
    }


def _handler(server: ScriptedModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def _seen(self, body: Any, raw: bytes) -> Seen:
            seen = Seen(self.command, self.path, _recorded_headers(self.headers), body, raw)
            with server.lock:
                server.seen.append(seen)
            return seen

        def _send(self, seen: Seen, reply: Reply) -> None:
            if reply.hang:  # recorded with status 0: asked, never answered
                server.stopping.wait()
                self.close_connection = True
                return
            data = (
                reply.body.encode()
                if isinstance(reply.body, str)
                else json.dumps(reply.body).encode()
            )
            seen.status = reply.status
            self.send_response(reply.status)
            self.send_header("content-type", "application/json")
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, seen: Seen, events: Iterator[bytes]) -> None:
            seen.status = 200
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            self.close_connection = True
            for chunk in events:
                self.wfile.write(chunk)
                self.wfile.flush()

        def do_HEAD(self) -> None:  # Claude Code's connectivity probe
            seen = self._seen(None, b"")
            seen.status = 200
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            seen = self._seen(None, b"")
            if not server.key_ok(dict(self.headers)):
                self._send(seen, Reply(401, {"error": {"message": "invalid api key"}}))
            elif self.path.split("?", 1)[0].endswith("/models"):
                models = [{"id": m, "object": "model"} for m in server.models]
                self._send(seen, Reply(200, {"object": "list", "data": models}))
            else:
                self._send(seen, Reply(404, {"error": {"message": "no such path"}}))

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length", "0")))
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                body = {"unreadable": raw.decode("utf-8", "replace")[:200]}
            seen = self._seen(body, raw)
            wire = wire_of(self.path)
            if wire is None or not isinstance(body, dict):
                self._send(seen, Reply(404, {"error": {"message": "no such path"}}))
                return
            request = Request(wire, self.path, body, dict(self.headers))
            answer = server.answer(request)
            if isinstance(answer, Turn):
                seen.usage = answer.usage
            if isinstance(answer, Reply):
                self._send(seen, answer)
            elif request.stream:
                self._stream(seen, RENDER_SSE[wire](answer, body))
            else:
                self._send(seen, Reply(200, RENDER_JSON[wire](answer, body)))

    return Handler


# --- rendering a Turn in each wire format ---------------------------------------------------


def _sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {payload}\n\n".encode()


def _args_text(call: Call) -> str:
    return call.args if isinstance(call.args, str) else json.dumps(call.args)


# Anthropic Messages


def _anthropic_usage(turn: Turn) -> dict[str, int]:
    return {
        "input_tokens": turn.usage[0] - turn.cached,
        "output_tokens": turn.usage[1],
        "cache_read_input_tokens": turn.cached,
        "cache_creation_input_tokens": 0,
    }


def _anthropic_content(turn: Turn) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = [{"type": "text", "text": turn.text}] if turn.text else []
    content += [
        {"type": "tool_use", "id": f"toolu_{next(_IDS):04d}", "name": c.name, "input": c.args}
        for c in turn.calls
    ]
    return content


def anthropic_json(turn: Turn, body: dict[str, Any]) -> dict[str, Any]:
    return {
        # One per turn: Claude Code merges turns that share an id into one message, and then
        # finds too few of them to compact (issue 31).
        "id": f"msg_{next(_IDS):04d}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-test"),
        "content": _anthropic_content(turn),
        "stop_reason": "tool_use" if turn.calls else "end_turn",
        "stop_sequence": None,
        "usage": _anthropic_usage(turn),
    }


def anthropic_sse(turn: Turn, body: dict[str, Any]) -> Iterator[bytes]:
    message = anthropic_json(turn, body)
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    yield _sse("message_start", {"type": "message_start", "message": start})
    for index, block in enumerate(message["content"]):
        opened: dict[str, Any]
        if block["type"] == "text":
            opened = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            opened = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield _sse(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": opened},
        )
        yield _sse(
            "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        )
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
    yield _sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        },
    )
    yield _sse("message_stop", {"type": "message_stop"})


# OpenAI Responses


def _responses_items(turn: Turn) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for call in turn.calls:
        i = next(_IDS)
        if isinstance(call.args, str):
            items.append(
                {
                    "type": "custom_tool_call",
                    "id": f"ctc_{i:04d}",
                    "call_id": f"call_{i:04d}",
                    "name": call.name,
                    "input": call.args,
                    "status": "completed",
                }
            )
        else:
            items.append(
                {
                    "type": "function_call",
                    "id": f"fc_{i:04d}",
                    "call_id": f"call_{i:04d}",
                    "name": call.name,
                    "arguments": json.dumps(call.args),
                    "status": "completed",
                }
            )
    if turn.text:
        items.append(
            {
                "type": "message",
                "id": "msg_01",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
            }
        )
    return items


def responses_json(turn: Turn, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "resp_01",
        "object": "response",
        "status": "completed",
        "model": body.get("model", "gpt-test"),
        "output": _responses_items(turn),
        "usage": {
            "input_tokens": turn.usage[0],
            "input_tokens_details": {"cached_tokens": turn.cached},
            "output_tokens": turn.usage[1],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": sum(turn.usage),
        },
    }


def responses_sse(turn: Turn, body: dict[str, Any]) -> Iterator[bytes]:
    response = responses_json(turn, body)
    created = {**response, "status": "in_progress", "output": [], "usage": None}
    yield _sse("response.created", {"type": "response.created", "response": created})
    for index, item in enumerate(response["output"]):
        yield _sse(
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": index, "item": item},
        )
    yield _sse("response.completed", {"type": "response.completed", "response": response})


# OpenAI Chat Completions


def _chat_usage(turn: Turn) -> dict[str, Any]:
    return {
        "prompt_tokens": turn.usage[0],
        "completion_tokens": turn.usage[1],
        "total_tokens": sum(turn.usage),
        "prompt_tokens_details": {"cached_tokens": turn.cached},
    }


def chat_json(turn: Turn, body: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    if turn.calls:
        message["tool_calls"] = [
            {
                "id": f"call_{next(_IDS):04d}",
                "type": "function",
                "function": {"name": c.name, "arguments": _args_text(c)},
            }
            for c in turn.calls
        ]
    return {
        "id": "chatcmpl-01",
        "object": "chat.completion",
        "created": 1_800_000_000,
        "model": body.get("model", "gpt-test"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if turn.calls else "stop",
            }
        ],
        "usage": _chat_usage(turn),
    }


def chat_sse(turn: Turn, body: dict[str, Any]) -> Iterator[bytes]:
    def chunk(choices: list[dict[str, Any]], **extra: Any) -> bytes:
        return _sse(
            None,
            {
                "id": "chatcmpl-01",
                "object": "chat.completion.chunk",
                "created": 1_800_000_000,
                "model": body.get("model", "gpt-test"),
                "choices": choices,
                **extra,
            },
        )

    yield chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}}])
    if turn.text:
        yield chunk([{"index": 0, "delta": {"content": turn.text}}])
    for i, call in enumerate(turn.calls):
        opened = {
            "index": i,
            "id": f"call_{next(_IDS):04d}",
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        yield chunk([{"index": 0, "delta": {"tool_calls": [opened]}}])
        more = {"index": i, "function": {"arguments": _args_text(call)}}
        yield chunk([{"index": 0, "delta": {"tool_calls": [more]}}])
    finish = "tool_calls" if turn.calls else "stop"
    yield chunk([{"index": 0, "delta": {}, "finish_reason": finish}])
    options = body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        yield chunk([], usage=_chat_usage(turn))
    yield _sse(None, "[DONE]")


RENDER_JSON: dict[str, Callable[[Turn, dict[str, Any]], dict[str, Any]]] = {
    "anthropic": anthropic_json,
    "responses": responses_json,
    "chat": chat_json,
}
RENDER_SSE: dict[str, Callable[[Turn, dict[str, Any]], Iterator[bytes]]] = {
    "anthropic": anthropic_sse,
    "responses": responses_sse,
    "chat": chat_sse,
}
