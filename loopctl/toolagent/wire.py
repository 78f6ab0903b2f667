"""The two model-API wire formats: OpenAI chat completions and Anthropic messages.

The session keeps a provider-neutral conversation (user text, assistant turns with tool calls,
tool results); each wire turns it into a request body and a response into a ModelReply.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from loopctl.toolagent.tools import ToolSpec


class MalformedReply(Exception):
    """The API answered 2xx with a body that is not the expected shape."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: Any  # the parsed JSON object, or the raw text when it was not valid JSON
    valid: bool = True


@dataclass(frozen=True, slots=True)
class ModelReply:
    text: str
    calls: tuple[ToolCall, ...]
    stop_reason: str
    input_tokens: int | None = None  # every input token, cached ones included
    output_tokens: int | None = None
    cached_tokens: int | None = None
    model: str | None = None


@dataclass(frozen=True, slots=True)
class UserText:
    text: str


@dataclass(frozen=True, slots=True)
class AssistantTurn:
    text: str
    calls: tuple[ToolCall, ...]


@dataclass(frozen=True, slots=True)
class ToolResult:
    call_id: str
    name: str
    content: str
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class ToolResults:
    results: tuple[ToolResult, ...] = field(default_factory=tuple)


Message = UserText | AssistantTurn | ToolResults


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _base(base_url: str) -> tuple[str, str]:
    parts = urlsplit(base_url.rstrip("/"))
    return base_url.rstrip("/"), parts.path.rstrip("/")


class OpenAIWire:
    """`POST {base_url}/chat/completions` (base_url usually ends in /v1)."""

    name = "openai"
    default_base_url = "https://api.openai.com/v1"
    default_key_env = "OPENAI_API_KEY"

    def url(self, base_url: str, endpoint: str = "chat/completions") -> str:
        base, path = _base(base_url)
        if not path:
            base += "/v1"  # "http://localhost:11434" means the server's /v1
        return f"{base}/{endpoint}"

    def headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        return headers

    def body(
        self,
        model: str,
        system: str,
        messages: list[Message],
        tools: list[ToolSpec],
        max_tokens: int,
    ) -> dict[str, Any]:
        wire: list[dict[str, Any]] = [{"role": "system", "content": system}]
        for message in messages:
            if isinstance(message, UserText):
                wire.append({"role": "user", "content": message.text})
            elif isinstance(message, AssistantTurn):
                item: dict[str, Any] = {"role": "assistant", "content": message.text or None}
                if message.calls:
                    item["tool_calls"] = [
                        {
                            "id": call.id,
                            "type": "function",
                            "function": {
                                "name": call.name,
                                "arguments": json.dumps(call.arguments)
                                if call.valid
                                else str(call.arguments),
                            },
                        }
                        for call in message.calls
                    ]
                wire.append(item)
            else:
                for result in message.results:
                    wire.append(
                        {"role": "tool", "tool_call_id": result.call_id, "content": result.content}
                    )
        body: dict[str, Any] = {"model": model, "messages": wire}
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in tools
            ]
            body["tool_choice"] = "auto"
        return body

    def parse(self, payload: object) -> ModelReply:
        if not isinstance(payload, dict):
            raise MalformedReply("the body is not a JSON object")
        choices = payload.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise MalformedReply("no 'choices' in the reply")
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise MalformedReply("'choices[0].message' is missing")
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        calls: list[ToolCall] = []
        raw_calls = message.get("tool_calls") or []
        if not isinstance(raw_calls, list):
            raise MalformedReply("'tool_calls' is not a list")
        for index, raw in enumerate(raw_calls):
            function = raw.get("function") if isinstance(raw, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise MalformedReply(f"tool call {index} has no function name")
            arguments = function.get("arguments")
            try:
                parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
                valid = isinstance(parsed, dict)
            except ValueError:
                parsed, valid = arguments, False
            if parsed is None and arguments in (None, ""):
                parsed, valid = {}, True
            raw_id = raw.get("id")
            call_id = raw_id if isinstance(raw_id, str) else f"call_{index}"
            calls.append(ToolCall(call_id, function["name"], parsed, valid))
        usage = _dict(payload.get("usage"))
        details = usage.get("prompt_tokens_details")
        cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else None
        return ModelReply(
            text=text,
            calls=tuple(calls),
            stop_reason=str(choices[0].get("finish_reason") or ""),
            input_tokens=_count(usage.get("prompt_tokens")),
            output_tokens=_count(usage.get("completion_tokens")),
            cached_tokens=cached,
            model=payload.get("model") if isinstance(payload.get("model"), str) else None,
        )

    def error_message(self, payload: object) -> str | None:
        if isinstance(payload, dict):
            error = payload.get("error")
            if isinstance(error, dict) and error.get("message"):
                return str(error["message"])
            if isinstance(error, str):
                return error
        return None


class AnthropicWire:
    """`POST {base_url}/v1/messages` (base_url without /v1, like the Anthropic SDK)."""

    name = "anthropic"
    default_base_url = "https://api.anthropic.com"
    default_key_env = "ANTHROPIC_API_KEY"
    version = "2023-06-01"

    def url(self, base_url: str, endpoint: str = "messages") -> str:
        base, path = _base(base_url)
        if not path.endswith("/v1"):
            base += "/v1"
        return f"{base}/{endpoint}"

    def headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"content-type": "application/json", "anthropic-version": self.version}
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def body(
        self,
        model: str,
        system: str,
        messages: list[Message],
        tools: list[ToolSpec],
        max_tokens: int,
    ) -> dict[str, Any]:
        wire: list[dict[str, Any]] = []
        for message in messages:
            if isinstance(message, UserText):
                wire.append({"role": "user", "content": message.text})
            elif isinstance(message, AssistantTurn):
                blocks: list[dict[str, Any]] = []
                if message.text:
                    blocks.append({"type": "text", "text": message.text})
                for call in message.calls:
                    arguments = call.arguments if isinstance(call.arguments, dict) else {}
                    blocks.append(
                        {"type": "tool_use", "id": call.id, "name": call.name, "input": arguments}
                    )
                wire.append({"role": "assistant", "content": blocks or "(no text)"})
            else:
                wire.append(
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": result.call_id,
                                "content": result.content,
                                **({"is_error": True} if result.is_error else {}),
                            }
                            for result in message.results
                        ],
                    }
                )
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": max_tokens,
            "system": system,
            "messages": wire,
        }
        if tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in tools
            ]
        return body

    def parse(self, payload: object) -> ModelReply:
        if not isinstance(payload, dict):
            raise MalformedReply("the body is not a JSON object")
        content = payload.get("content")
        if not isinstance(content, list):
            raise MalformedReply("no 'content' list in the reply")
        texts: list[str] = []
        calls: list[ToolCall] = []
        for index, block in enumerate(content):
            if not isinstance(block, dict):
                raise MalformedReply(f"content block {index} is not an object")
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif block.get("type") == "tool_use":
                if not isinstance(block.get("name"), str):
                    raise MalformedReply(f"tool_use block {index} has no name")
                arguments = block.get("input")
                raw_id = block.get("id")
                call_id = raw_id if isinstance(raw_id, str) else f"tu_{index}"
                calls.append(
                    ToolCall(call_id, block["name"], arguments, isinstance(arguments, dict))
                )
        usage = _dict(payload.get("usage"))
        fresh = _count(usage.get("input_tokens"))
        read = _count(usage.get("cache_read_input_tokens")) or 0
        written = _count(usage.get("cache_creation_input_tokens")) or 0
        return ModelReply(
            text="\n".join(texts),
            calls=tuple(calls),
            stop_reason=str(payload.get("stop_reason") or ""),
            input_tokens=None if fresh is None else fresh + read + written,
            output_tokens=_count(usage.get("output_tokens")),
            cached_tokens=read if fresh is not None else None,
            model=payload.get("model") if isinstance(payload.get("model"), str) else None,
        )

    def error_message(self, payload: object) -> str | None:
        if isinstance(payload, dict):
            error = payload.get("error")
            if isinstance(error, dict) and error.get("message"):
                return str(error["message"])
        return None


Wire = OpenAIWire | AnthropicWire


def wire_for(name: str) -> Wire:
    return AnthropicWire() if name == "anthropic" else OpenAIWire()
