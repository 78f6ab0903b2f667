"""The scripted model server itself: each wire format, streamed and plain, and what it records.

The real CLIs are its main clients (test_real_clis.py); these tests pin the shapes down where
no CLI is installed, reading the streams the way a client does.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.model_server import Call, Reply, Request, ScriptedModelServer, Turn, secret_digest
from support.processes import wait_for

TURN = Turn(text="Looking.", calls=[Call("Read", {"file_path": "/w/calc.py"})], usage=(120, 30))
PATHS = {
    "anthropic": "/v1/messages",
    "responses": "/v1/responses",
    "chat": "/v1/chat/completions",
}


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(lambda request, server: TURN) as running:
        yield running


def sse_events(response: httpx.Response) -> list[tuple[str | None, Any]]:
    found: list[tuple[str | None, Any]] = []
    name: str | None = None
    for line in response.iter_lines():
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            data = line.removeprefix("data: ")
            found.append((name, data if data == "[DONE]" else json.loads(data)))
            name = None
    return found


def post(server: ScriptedModelServer, wire: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(server.url + PATHS[wire], json=body, timeout=10)


def test_anthropic_stream_carries_text_a_tool_call_and_usage(server: ScriptedModelServer) -> None:
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with httpx.stream("POST", server.url + "/v1/messages", json=body, timeout=10) as response:
        events = sse_events(response)

    names = [name for name, _ in events]
    assert names[0] == "message_start"
    assert names[-1] == "message_stop"
    deltas = [data["delta"] for name, data in events if name == "content_block_delta"]
    assert deltas[0] == {"type": "text_delta", "text": "Looking."}
    assert json.loads(deltas[1]["partial_json"]) == {"file_path": "/w/calc.py"}
    (stop,) = [data for name, data in events if name == "message_delta"]
    assert stop["delta"]["stop_reason"] == "tool_use"
    assert stop["usage"]["output_tokens"] == 30
    assert events[0][1]["message"]["usage"]["input_tokens"] == 120


def test_responses_stream_ends_with_the_whole_response(server: ScriptedModelServer) -> None:
    body = {"model": "gpt-5.5", "stream": True, "input": []}
    with httpx.stream("POST", server.url + "/v1/responses", json=body, timeout=10) as response:
        events = sse_events(response)

    assert [name for name, _ in events] == [
        "response.created",
        "response.output_item.done",
        "response.output_item.done",
        "response.completed",
    ]
    call, message = (data["item"] for _, data in events[1:3])
    assert (call["type"], call["name"]) == ("function_call", "Read")
    assert message["content"][0]["text"] == "Looking."
    usage = events[-1][1]["response"]["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (120, 30)


def test_chat_stream_sends_usage_only_when_asked(server: ScriptedModelServer) -> None:
    def chunks(options: dict[str, Any] | None) -> list[Any]:
        body: dict[str, Any] = {"model": "m", "stream": True, "messages": []}
        if options is not None:
            body["stream_options"] = options
        url = server.url + "/v1/chat/completions"
        with httpx.stream("POST", url, json=body, timeout=10) as response:
            return [data for _, data in sse_events(response)]

    plain, counted = chunks(None), chunks({"include_usage": True})

    assert plain[-1] == counted[-1] == "[DONE]"
    assert not any("usage" in c for c in plain[:-1])
    assert counted[-2]["usage"]["prompt_tokens"] == 120
    calls = [
        call
        for c in plain[:-1]
        for choice in c["choices"]
        for call in choice["delta"].get("tool_calls", [])
    ]
    assert calls[0]["function"]["name"] == "Read"
    assert json.loads(calls[1]["function"]["arguments"]) == {"file_path": "/w/calc.py"}
    assert plain[-2]["choices"][0]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize("wire", ["anthropic", "responses", "chat"])
def test_a_client_that_does_not_stream_gets_plain_json(
    server: ScriptedModelServer, wire: str
) -> None:
    response = post(server, wire, {"model": "m", "messages": [], "input": []})

    assert response.headers["content-type"] == "application/json"
    text = json.dumps(response.json())
    assert "Looking." in text
    assert "/w/calc.py" in text


def test_tool_call_ids_are_unique_across_turns(server: ScriptedModelServer) -> None:
    first = post(server, "anthropic", {"messages": []}).json()["content"][1]["id"]
    second = post(server, "anthropic", {"messages": []}).json()["content"][1]["id"]
    assert first != second  # Claude Code re-asks a turn that reuses an id


def test_requests_are_recorded_with_credentials_hashed(server: ScriptedModelServer) -> None:
    server.key = "sk-right"
    refused = httpx.post(
        server.url + "/v1/messages", json={"messages": []}, headers={"x-api-key": "sk-wrong"}
    )
    accepted = httpx.post(
        server.url + "/v1/chat/completions",
        json={"messages": []},
        headers={"authorization": "Bearer sk-right"},
    )

    assert (refused.status_code, accepted.status_code) == (401, 200)
    wrong, right = server.seen
    assert wrong.headers["x-api-key"] == secret_digest("sk-wrong")
    assert right.headers["authorization"] == secret_digest("Bearer sk-right")
    assert (wrong.status, right.status) == (401, 200)
    assert "sk-right" not in json.dumps([s.record() for s in server.seen])


def test_queued_replies_come_first_and_a_hang_is_released_on_stop() -> None:
    seen_steps: list[int] = []

    def script(request: Request, server: ScriptedModelServer) -> Turn:
        seen_steps.append(request.step)
        return Turn(text="ok")

    server = ScriptedModelServer(script).start()
    server.queue = [Reply(429, {"error": {"message": "slow down"}}), Reply(hang=True)]
    limited = post(server, "chat", {"messages": []})
    outcome: list[BaseException | httpx.Response] = []

    def hung_call() -> None:
        try:
            outcome.append(post(server, "chat", {"messages": []}))
        except httpx.HTTPError as exc:
            outcome.append(exc)

    caller = threading.Thread(target=hung_call)
    caller.start()
    wait_for(lambda: len(server.seen) == 2 or None, "the hung request to arrive")
    server.stop()
    caller.join(10)

    assert limited.status_code == 429
    assert not caller.is_alive()
    assert isinstance(outcome[0], httpx.HTTPError)  # closed without an answer
    assert server.seen[1].status == 0
    assert seen_steps == []  # the script was never consulted


def test_the_step_counts_tool_results_in_each_wire_format() -> None:
    anthropic = Request(
        "anthropic",
        "/v1/messages",
        {"messages": [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}]},
        {},
    )
    responses = Request(
        "responses",
        "/v1/responses",
        {"input": [{"type": "function_call_output"}, {"type": "custom_tool_call_output"}]},
        {},
    )
    chat = Request(
        "chat",
        "/v1/chat/completions",
        {"messages": [{"role": "tool", "content": "a"}] * 3},
        {},
    )
    assert (anthropic.step, responses.step, chat.step) == (1, 2, 3)
    told = Request("chat", "/", {"messages": [{"content": "Working directory: /w/x\n"}]}, {})
    assert told.cwd == "/w/x"
