"""OpenTelemetry traces: live OTLP/HTTP export of a real run, `traces export`, content capture.

A real OTLP/HTTP receiver (stdlib server on 127.0.0.1) takes what a real `loopctl goal` sends;
the same run rebuilt from its log by `loopctl traces export` must give the very same spans.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from support.backends import own_agent_fixes_calc
from support.cli import assert_clean_exit, invoke, run_loopctl
from support.journal import events
from support.model_server import Reply, Request, ScriptedModelServer
from support.processes import wait_for
from support.repos import FAST_CHECK, make_project, toml_value, write_agent, write_config

from loopctl.journal.spans import TOKEN_BUCKETS, span_id, time_ns, trace_id
from loopctl.journal.traces import TraceBuilder, build_trace

TASK = "tests-green"
CANARY = "trace-canary-7f3a9c1e5b2d4f6a"
PLAIN_CONFIG = (
    f'version = 1\n\n[defaults]\nmaker = "maker"\n\n[conditions]\n"tests green" = '
    f"{toml_value(FAST_CHECK)}\n"
)


# --- a real OTLP/HTTP receiver -----------------------------------------------------------------


class OtlpReceiver:
    """Accepts OTLP/HTTP JSON posts on /v1/traces and /v1/metrics, as a collector would."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, str, bytes]] = []  # (path, content type, body)
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path not in ("/v1/traces", "/v1/metrics"):
                    self.send_response(404)
                    self.end_headers()
                    return
                with receiver._lock:
                    receiver.posts.append((self.path, self.headers["Content-Type"], body))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def bodies(self, path: str) -> list[dict[str, Any]]:
        with self._lock:
            return [json.loads(body) for p, _type, body in self.posts if p == path]

    def raw(self) -> bytes:
        with self._lock:
            return b"".join(body for _p, _t, body in self.posts)


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    found = OtlpReceiver()
    found.thread.start()
    try:
        yield found
    finally:
        found.server.shutdown()
        found.server.server_close()


# --- reading OTLP/JSON -------------------------------------------------------------------------


def _value(value: dict[str, Any]) -> Any:
    if "stringValue" in value:
        return value["stringValue"]
    if "intValue" in value:
        return int(value["intValue"])
    if "boolValue" in value:
        return value["boolValue"]
    if "doubleValue" in value:
        return value["doubleValue"]
    if "arrayValue" in value:
        return [_value(v) for v in value["arrayValue"].get("values", [])]
    return value


def spans_of(documents: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every span in OTLP/JSON trace documents, by span id, attributes as a plain dict."""
    found: dict[str, dict[str, Any]] = {}
    for doc in documents:
        for resource in doc.get("resourceSpans", []):
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    attrs = {a["key"]: _value(a["value"]) for a in span.get("attributes", [])}
                    found[span["spanId"]] = {**span, "attrs": attrs}
    return found


def points_of(documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The data points of gen_ai.client.token.usage, attributes as a plain dict."""
    points = []
    for doc in documents:
        for resource in doc.get("resourceMetrics", []):
            for scope in resource["scopeMetrics"]:
                for metric in scope["metrics"]:
                    if metric["name"] != "gen_ai.client.token.usage":
                        continue
                    assert metric["unit"] == "{token}"
                    for point in metric["histogram"]["dataPoints"]:
                        attrs = {a["key"]: _value(a["value"]) for a in point["attributes"]}
                        points.append({**point, "attrs": attrs})
    return points


def file_documents(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _wait_for_tick(path: Path) -> dict[str, dict[str, Any]]:
    """The spans in `path` once the tick's span is there (in-process, a thread sends them)."""

    def ready() -> dict[str, dict[str, Any]] | None:
        found = spans_of(file_documents(path)) if path.exists() else {}
        return (
            found if any(s["name"].startswith("invoke_workflow") for s in found.values()) else None
        )

    return wait_for(ready, f"the tick's span in {path.name}")


def by_name(spans: dict[str, dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [s for s in spans.values() if s["name"] == name]


def _traced_file(capture: bool = False) -> str:
    return '\n[traces]\nexporter = "file"\nfile = "traces.jsonl"\n' + (
        "capture_content = true\n" if capture else ""
    )


# --- live export of a real run -----------------------------------------------------------------


def test_a_goal_run_sends_genai_spans_and_token_usage_to_an_otlp_receiver(
    repo: Path, receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    make_project(repo, "leaky_fixer.py", agent_extra='env.allow = ["TRACE_CANARY_TOKEN"]\n')
    write_agent(repo, "judge", "judge.py")
    monkeypatch.setenv("TRACE_CANARY_TOKEN", CANARY)
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "nightly-loops")

    done = run_loopctl(repo, "goal", "tests green", "--checker-agent", "judge")

    assert_clean_exit(done, 0)
    (document, *_rest) = receiver.bodies("/v1/traces")
    resource = {
        a["key"]: _value(a["value"]) for a in document["resourceSpans"][0]["resource"]["attributes"]
    }
    assert resource["service.name"] == "nightly-loops"
    assert {ctype for _p, ctype, _b in receiver.posts} == {"application/json"}  # no protobuf
    live = spans_of(receiver.bodies("/v1/traces"))
    (run,) = {e.run for e in events(repo, "tick_started")}
    assert run is not None
    assert {s["traceId"] for s in live.values()} == {trace_id(run)}

    (root,) = by_name(live, "invoke_workflow goal")
    assert "parentSpanId" not in root or not root["parentSpanId"]
    assert root["attrs"]["gen_ai.operation.name"] == "invoke_workflow"
    assert root["attrs"]["loopctl.tick.status"] == "done"
    (task,) = by_name(live, "task")
    assert task["parentSpanId"] == root["spanId"] == span_id(run, "tick")
    assert task["attrs"]["loopctl.task.status"] == "done"
    assert [e["name"] for e in task.get("events", [])] == ["commit_created"]
    (attempt,) = by_name(live, "attempt")
    assert attempt["parentSpanId"] == task["spanId"]
    assert attempt["attrs"]["loopctl.attempt.verdict"] == "passed"

    (maker,) = by_name(live, "invoke_agent maker")
    assert maker["parentSpanId"] == attempt["spanId"]
    assert maker["kind"] == 1  # INTERNAL: a subagent loopctl runs
    attrs = maker["attrs"]
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert attrs["gen_ai.agent.name"] == "maker"
    assert attrs["gen_ai.provider.name"] == "command"
    assert attrs["gen_ai.conversation.id"] == run
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (1000, 200)
    assert attrs["loopctl.agent.role"] == "maker"
    (judge,) = by_name(live, "invoke_agent judge")
    assert judge["parentSpanId"] == attempt["spanId"]
    assert judge["attrs"]["loopctl.agent.role"] == "checker"
    python = Path(FAST_CHECK[0]).name  # python or python3: whichever runs this suite
    (check,) = by_name(live, f"execute_tool {python}")
    assert check["parentSpanId"] == attempt["spanId"]
    assert check["attrs"]["gen_ai.tool.name"] == python
    assert check["attrs"]["loopctl.check.exit_code"] == 0
    assert check["attrs"]["loopctl.check.command"] == " ".join(FAST_CHECK)
    for span in (maker, judge, check):  # children sit inside their attempt
        assert int(attempt["startTimeUnixNano"]) <= int(span["startTimeUnixNano"])
        assert int(span["endTimeUnixNano"]) <= int(attempt["endTimeUnixNano"])

    # No prompt or output text without capture_content, and never the secret.
    everything = json.dumps(live)
    for key in ("gen_ai.input.messages", "gen_ai.output.messages", "loopctl.goal"):
        assert key not in everything
    assert CANARY.encode() not in receiver.raw()

    points = points_of(receiver.bodies("/v1/metrics"))
    by_type = {p["attrs"]["gen_ai.token.type"]: p for p in points}
    assert set(by_type) == {"input", "output"}
    assert by_type["input"]["attrs"]["gen_ai.provider.name"] == "command"
    assert by_type["input"]["attrs"]["gen_ai.operation.name"] == "invoke_agent"
    assert (int(by_type["input"]["count"]), by_type["input"]["sum"]) == (1, 1000)
    assert by_type["input"]["explicitBounds"] == [float(b) for b in TOKEN_BUCKETS]
    assert [int(c) for c in by_type["output"]["bucketCounts"]][TOKEN_BUCKETS.index(256)] == 1

    # The same run, rebuilt from the log after the fact: the very same spans.
    out = tmp_path / "rebuilt.jsonl"
    again = run_loopctl(repo, "traces", "export", run[:12], "--otlp-json", str(out), "--json")
    assert_clean_exit(again, 0)
    summary = json.loads(again.stdout)["export"]
    assert (summary["run"], summary["spans"], summary["unfinished"]) == (run, len(live), 0)
    rebuilt = spans_of(file_documents(out))
    assert rebuilt == live
    assert points_of(file_documents(out)) == points

    # ... or sent again over OTLP/HTTP, as after a collector outage.
    sent_before = len(receiver.bodies("/v1/traces"))
    resent = run_loopctl(repo, "traces", "export", run, "--otlp")
    assert_clean_exit(resent, 0)
    assert spans_of(receiver.bodies("/v1/traces")[sent_before:]) == live

    # Every gen_ai.* name used is one the GenAI semantic conventions define.
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes
    from opentelemetry.semconv._incubating.metrics import gen_ai_metrics

    defined = {
        value
        for name, value in vars(gen_ai_attributes).items()
        if name.startswith("GEN_AI_") and isinstance(value, str)
    }
    used = {key for span in live.values() for key in span["attrs"] if key.startswith("gen_ai.")}
    used |= {key for point in points for key in point["attrs"]}
    assert used <= defined, used - defined
    assert gen_ai_metrics.GEN_AI_CLIENT_TOKEN_USAGE == "gen_ai.client.token.usage"


def test_content_capture_is_opt_in_and_secrets_are_redacted_in_it(
    repo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    make_project(
        repo,
        "leaky_fixer.py",
        # Lent unchanged (issue 25's opt-out): the agent holds the token and prints it.
        agent_extra='\n[env.secrets]\nTRACE_CANARY_TOKEN = "real"\n',
        config_extra=_traced_file(capture=True),
    )
    monkeypatch.setenv("TRACE_CANARY_TOKEN", CANARY)

    result = invoke(monkeypatch, repo, "goal", "tests green")

    assert result.exit_code == 0, result.output
    traces = repo / "traces.jsonl"
    live = _wait_for_tick(traces)
    (maker,) = by_name(live, "invoke_agent maker")
    said = json.loads(maker["attrs"]["gen_ai.output.messages"])
    assert said[0]["role"] == "assistant"
    assert "fixed add() in calc.py; my token is [REDACTED]" in said[0]["parts"][0]["content"]
    asked = json.loads(maker["attrs"]["gen_ai.input.messages"])
    assert "Make this condition hold: tests green" in asked[0]["parts"][0]["content"]
    (root,) = by_name(live, "invoke_workflow goal")
    assert root["attrs"]["loopctl.goal"] == "tests green"
    (document, *_rest) = file_documents(traces)
    resource = {
        a["key"]: _value(a["value"]) for a in document["resourceSpans"][0]["resource"]["attributes"]
    }
    assert resource["service.name"] == "loopctl"
    assert "service.instance.id" not in resource
    assert CANARY not in traces.read_text()

    # Exported again without --capture-content (and with the config's capture off): no text.
    write_config(repo, PLAIN_CONFIG)
    plain = tmp_path / "plain.jsonl"
    run = root["attrs"]["loopctl.run.id"]
    exported = invoke(monkeypatch, repo, "traces", "export", run, "--otlp-json", str(plain))
    assert exported.exit_code == 0, exported.output
    text = plain.read_text()
    assert "gen_ai.output.messages" not in text
    assert "gen_ai.input.messages" not in text
    assert "my token is" not in text
    assert CANARY not in text
    assert set(spans_of(file_documents(plain))) == set(live)  # same spans, less said


def test_tool_calls_of_loopctls_own_agent_become_execute_tool_spans(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def script(request: Request, server: ScriptedModelServer) -> Reply:
        return own_agent_fixes_calc(request, FAST_CHECK)

    make_project(repo)
    with ScriptedModelServer() as server:
        server.script = script
        (repo / "agents" / "api.toml").write_text(
            'description = "api"\nbackend = "openai"\nmodel = "gpt-test"\n'
            f'base_url = "{server.url}/v1"\napi_key_env = "TRACE_CANARY_API_KEY"\n'
        )
        write_config(
            repo,
            'version = 1\n\n[defaults]\nmaker = "api"\n\n'
            f'[conditions]\n"tests green" = {toml_value(FAST_CHECK)}\n' + _traced_file(repo),
        )
        monkeypatch.setenv("TRACE_CANARY_API_KEY", CANARY)
        server.key = CANARY
        result = invoke(monkeypatch, repo, "goal", "tests green")
    assert result.exit_code == 0, result.output
    traces = repo / "traces.jsonl"
    live = _wait_for_tick(traces)
    (agent,) = by_name(live, "invoke_agent api")
    assert agent["attrs"]["gen_ai.provider.name"] == "openai"
    assert agent["attrs"]["gen_ai.request.model"] == "gpt-test"
    tools = sorted(
        (s for s in live.values() if s.get("parentSpanId") == agent["spanId"]),
        key=lambda s: int(s["startTimeUnixNano"]),
    )
    assert [s["name"] for s in tools] == [
        "execute_tool read_file",
        "execute_tool edit_file",
        "execute_tool run",
    ]
    for span in tools:
        assert span["attrs"]["gen_ai.operation.name"] == "execute_tool"
        assert span["attrs"]["gen_ai.tool.call.id"]
        assert int(agent["startTimeUnixNano"]) <= int(span["startTimeUnixNano"])
        assert int(span["endTimeUnixNano"]) <= int(agent["endTimeUnixNano"])
    assert CANARY not in traces.read_text()


def test_a_collector_that_is_down_never_fails_or_hangs_the_run(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    make_project(repo, "fixer.py")
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")

    done = run_loopctl(repo, "goal", "tests green", timeout=40)

    assert_clean_exit(done, 0)
    assert "export" not in done.stderr.lower()  # the exporter's complaints stay quiet
    assert events(repo, "tick_finished")[0].data["status"] == "done"


def test_a_resumed_run_is_one_trace_whose_live_spans_match_the_rebuilt_ones(
    repo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    make_project(repo, "fixer.py", config_extra=_traced_file(repo))
    # Killed right after attempt 1 starts (whatever notes came before it): nothing has
    # finished, nothing was sent.
    killed = run_loopctl(repo, "goal", "tests green", kill_at_seq="attempt_started")
    assert killed.returncode == -9, killed.stderr
    assert [e.type for e in events(repo)][-1] == "attempt_started"

    resumed = run_loopctl(repo, "goal", "tests green")

    assert_clean_exit(resumed, 0)
    assert events(repo, "run_resumed")
    live = spans_of(file_documents(repo / "traces.jsonl"))
    (run,) = {e.run for e in events(repo, "tick_started")}
    rebuilt = tmp_path / "rebuilt.jsonl"
    exported = run_loopctl(repo, "traces", "export", str(run), "--otlp-json", str(rebuilt))
    assert_clean_exit(exported, 0)
    assert spans_of(file_documents(rebuilt)) == live
    (root,) = by_name(live, "invoke_workflow goal")
    first = events(repo, "tick_started")[0]
    assert int(root["startTimeUnixNano"]) == _ns(first.ts)  # from the killed process's start
    assert [e["name"] for e in root.get("events", [])] == ["run_resumed"]
    (attempt,) = by_name(live, "attempt")
    assert [e["name"] for e in attempt.get("events", [])] == ["attempt_restarted"]


def _ns(ts: str) -> int:
    return time_ns(ts)


# --- export of an unfinished run, settings, the extra missing ----------------------------------


def test_an_unfinished_run_exports_its_open_spans_marked_unfinished(repo: Path) -> None:
    from loopctl.journal.events import EventLog

    log = EventLog(repo / "events.jsonl")
    run = "20261130T000000-abcd"
    log.append("tick_started", run=run, loop="goal", data={"kind": "goal", "maker": "m"})
    log.append("task_found", run=run, loop="goal", task="t", data={"prompt": "p", "title": "x"})
    log.append("attempt_started", run=run, loop="goal", task="t", data={"attempt": 1})
    log.append(
        "agent_finished",
        run=run,
        loop="goal",
        task="t",
        data={"attempt": 1, "role": "maker", "agent": "m", "backend": "claude",
              "duration_s": 0.5, "input_tokens": 5000, "output_tokens": 300,
              "status": "timeout", "request_model": "claude-x"},
    )  # fmt: skip

    batch = build_trace(log.read())

    names = {s.name: s for s in batch.spans}
    assert set(names) == {"invoke_workflow goal", "task", "attempt", "invoke_agent m"}
    agent = names["invoke_agent m"]
    assert agent.attributes["gen_ai.provider.name"] == "anthropic"
    assert agent.attributes["error.type"] == "timeout"
    assert agent.end_ns - agent.start_ns == 500_000_000
    for name in ("invoke_workflow goal", "task", "attempt"):
        assert names[name].attributes["loopctl.unfinished"] is True
        assert names[name].end_ns == agent.end_ns  # closed at the run's last event
    assert "loopctl.task.title" not in names["task"].attributes
    (inp,) = [p for p in batch.token_usage if p.attributes["gen_ai.token.type"] == "input"]
    assert (inp.count, inp.sum, inp.bucket_counts[TOKEN_BUCKETS.index(16384)]) == (1, 5000, 1)


def test_a_delivery_step_approved_after_the_tick_is_a_span_of_its_task(tmp_path: Path) -> None:
    from loopctl.journal.events import EventLog

    log = EventLog(tmp_path / "events.jsonl")
    run = "20261130T000000-beef"
    for type_, task, data in [
        ("tick_started", None, {"kind": "tick"}),
        ("task_found", "pr-7", {"prompt": "fix", "title": "x"}),
        ("task_finished", "pr-7", {"status": "awaiting_approval", "attempts": 1}),
        ("tick_finished", None, {"status": "done", "tasks": {"awaiting_approval": 1}}),
        # Later, in another process, after `loopctl inbox approve`:
        ("action_started", "pr-7", {"step": 1, "action": "push", "gated": True}),
        ("action_finished", "pr-7", {"step": 1, "action": "push", "ok": False, "detail": "no"}),
    ]:
        log.append(type_, run=run, loop="babysit", task=task, data=data)
    events = log.read()

    builder = TraceBuilder()  # fed one event at a time, as the live exporter is
    produced = [[s.name for s in builder.feed(e).spans] for e in events]

    assert produced == [[], [], ["task"], ["invoke_workflow babysit"], [], ["execute_tool push"]]
    push = build_trace(events).spans[-1]
    assert push.parent_id == span_id(run, "task", "pr-7")
    assert push.attributes["gen_ai.tool.name"] == "push"
    assert push.attributes["loopctl.action.gated"] is True
    assert push.attributes["error.type"] == "failed"
    assert "gen_ai.tool.call.result" not in push.attributes  # the detail is content
    assert builder.flush().spans == ()  # nothing left open, nothing held


@pytest.mark.parametrize(
    ("config", "env", "expected"),
    [
        ("", {}, None),
        ('exporter = "file"', {}, "file"),
        ('exporter = "file"', {"OTEL_SDK_DISABLED": "true"}, None),
        ('exporter = "file"', {"OTEL_TRACES_EXPORTER": "none"}, None),
        ("", {"OTEL_TRACES_EXPORTER": "otlp"}, "otlp"),
        ('exporter = "none"', {"OTEL_TRACES_EXPORTER": "otlp"}, "otlp"),
        ('exporter = "otlp"', {}, "otlp"),
    ],
)
def test_which_exporter_is_in_force(
    tmp_path: Path, config: str, env: dict[str, str], expected: str | None
) -> None:
    from loopctl.definitions.config import load_config
    from loopctl.definitions.source import Problems
    from loopctl.journal.otel import trace_settings

    path = tmp_path / ".loop" / "config.toml"
    path.parent.mkdir()
    path.write_text(f"version = 1\n[traces]\n{config}\n")
    problems = Problems()
    loaded = load_config(path, problems)
    assert problems.items == []
    settings = trace_settings(loaded.traces, tmp_path, env)
    assert (settings.exporter.value if settings else None) == expected
    if settings is not None and expected == "file":
        assert settings.file == tmp_path / ".loop" / "log" / "traces.jsonl"


def test_bad_traces_settings_are_one_clear_line(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, config_extra='\n[traces]\nexporter = "otlp-http"\ncapture = true\n')
    result = invoke(monkeypatch, repo, "validate")
    assert result.exit_code == 2
    assert "config.toml:" in result.output
    assert "'exporter' in [traces] must be one of none, otlp, file" in result.output
    assert "unknown key 'capture' in [traces]" in result.output

    write_config(repo, PLAIN_CONFIG)
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    done = run_loopctl(repo, "goal", "tests green")
    assert_clean_exit(done, 2)
    assert "OTEL_TRACES_EXPORTER=zipkin is not an exporter loopctl has" in done.stderr


def test_without_the_extra_tracing_on_is_a_one_line_error_and_off_costs_nothing(
    repo: Path,
) -> None:
    make_project(repo, config_extra=_traced_file(repo))
    # As if the otel extra were not installed: every opentelemetry import fails.
    hide = (
        "import sys; sys.modules['opentelemetry'] = None; "
        "from loopctl.__main__ import main; sys.exit(main())"
    )
    done = subprocess.run(
        [sys.executable, "-c", hide, "goal", "tests green"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "pip install 'opentelemetry-sdk>=1.45,<2'" in done.stderr
    assert "loopctl[" not in done.stderr  # the bare name on the index is someone else's

    write_config(repo, PLAIN_CONFIG)  # tracing off: OpenTelemetry is never imported
    probe = (
        "import sys\n"
        "from loopctl.definitions import load_project\n"
        "from loopctl.journal.recorder import Recorder\n"
        "rec = Recorder(load_project(__import__('pathlib').Path.cwd()))\n"
        "rec.emit('note', run='r', loop='l', what='x')\n"
        "assert rec.traces is None\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=repo, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
