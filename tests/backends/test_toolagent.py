"""loopctl's own tool-using agent against a real local HTTP server (OpenAI and Anthropic wires).

Covers the tools and their confinement, scripted sessions (read a file, edit it, run the
check), retries (429 then success, a 500 storm), a malformed reply, the turn limit, the API key
staying in the header, and compaction over a 100-turn session.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from support.backends import anthropic_reply, make_agent, make_request, openai_reply, reply_for
from support.model_server import Reply, Request, ScriptedModelServer, secret_digest

from loopctl.secrets import Redactor
from loopctl.toolagent.client import (
    RetryPolicy,
    backoff,
    reset_after,
    retry_after,
    uses_environment,
)
from loopctl.toolagent.session import SessionConfig, run_session
from loopctl.toolagent.tools import ToolContext, ask_match, call_tool, confine
from loopctl.toolagent.wire import wire_for


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


CALC = "def add(a, b):\n    return a - b\n"
CHECK = [sys.executable, "-B", "-c", "import calc; assert calc.add(2, 3) == 5, 'add is wrong'"]
KEY = "sk-canary-key-0123456789abcdef"
FAST = RetryPolicy(max_retries=3, base_s=0.01, cap_s=0.05)


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    folder = tmp_path / "wt"
    folder.mkdir()
    (folder / "calc.py").write_text(CALC)
    return folder


def fix_script(request: Request, server: ScriptedModelServer) -> Reply:
    """read calc.py → edit it → run the check → say done."""
    reply = reply_for(request)
    step = len(request.tool_results)
    if step == 0:
        return reply(calls=[("read_file", {"path": "calc.py"})])
    if step == 1:
        edit = {"path": "calc.py", "old": "return a - b", "new": "return a + b"}
        return reply(text="Found the bug.", calls=[("edit_file", edit)])
    if step == 2:
        return reply(calls=[("run", {"argv": CHECK})])
    return reply(text="Fixed add(); the check passes.")


def config(server: ScriptedModelServer, wire: str, worktree: Path, **fields: Any) -> SessionConfig:
    values: dict[str, Any] = {
        "wire": wire_for(wire),
        "base_url": server.url + ("/v1" if wire == "openai" else ""),
        "model": "gpt-test" if wire == "openai" else "claude-test",
        "api_key": KEY,
        "instructions": "Keep changes minimal.",
        "prompt": "# Task calc\nFix add().\n\n# Goal\ntests green\n\n# Rules\n- Never edit tests.",
        "worktree": worktree,
        "tool_env": {"PATH": os.environ["PATH"], "HOME": os.environ["HOME"]},
        "redactor": Redactor([KEY]),
        "retry": FAST,
        "transcript": worktree.parent / "logs" / "maker.out",
        "notes": worktree.parent / "logs" / "maker.err",
    }
    values.update(fields)
    return SessionConfig(**values)


# --- tools ---------------------------------------------------------------------------------------


def test_paths_are_confined_to_the_worktree(worktree: Path, tmp_path: Path) -> None:
    root = worktree.resolve()
    (tmp_path / "secret.txt").write_text("outside")
    (worktree / "link").symlink_to(tmp_path / "secret.txt")
    (worktree / "dirlink").symlink_to(tmp_path)
    (worktree / ".git").mkdir()
    (worktree / "loop1").symlink_to(worktree / "loop2")
    (worktree / "loop2").symlink_to(worktree / "loop1")
    assert confine(root, "calc.py") == root / "calc.py"
    assert confine(root, "sub/../calc.py") == root / "calc.py"
    ctx = ToolContext(worktree=worktree, env={}, redactor=Redactor([]))
    for bad in ("../secret.txt", str(tmp_path / "secret.txt"), "link", "dirlink/secret.txt",
                ".git/config", "loop1", "sub/../../secret.txt"):  # fmt: skip
        outcome = call_tool(ctx, "read_file", {"path": bad})
        assert outcome.is_error, bad
        assert "outside" not in outcome.content or "outside the worktree" in outcome.content
        written = call_tool(ctx, "write_file", {"path": bad, "content": "pwned"})
        assert written.is_error, bad
    assert (tmp_path / "secret.txt").read_text() == "outside"
    assert not (worktree / ".git" / "config").exists()


def test_tools_read_edit_list_search_and_load_skill(worktree: Path, tmp_path: Path) -> None:
    from loopctl.definitions.skills import Skill

    skill_md = tmp_path / "skills" / "fix-ci" / "SKILL.md"
    skill_md.parent.mkdir(parents=True)
    skill_md.write_text("---\nname: fix-ci\ndescription: Fix CI.\n---\nRun the tests first.\n")
    skill = Skill("fix-ci", "Fix CI.", skill_md)
    ctx = ToolContext(worktree=worktree, env={}, redactor=Redactor([]), skills={"fix-ci": skill})
    assert call_tool(ctx, "read_file", {"path": "calc.py"}).content == CALC
    twice = call_tool(ctx, "write_file", {"path": "pkg/x.py", "content": "a = 1\na = 1\n"})
    assert twice.changed == "pkg/x.py"
    ambiguous = call_tool(ctx, "edit_file", {"path": "pkg/x.py", "old": "a = 1", "new": "b"})
    assert ambiguous.is_error
    assert "occurs 2 times" in ambiguous.content
    missing = call_tool(ctx, "edit_file", {"path": "calc.py", "old": "nope", "new": "x"})
    assert missing.is_error
    assert "not found" in missing.content
    assert not call_tool(ctx, "edit_file", {"path": "calc.py", "old": "- b", "new": "+ b"}).is_error
    assert "return a + b" in (worktree / "calc.py").read_text()
    assert call_tool(ctx, "list_files", {}).content.splitlines() == ["calc.py", "pkg/x.py"]
    assert call_tool(ctx, "search", {"pattern": r"a \+ b"}).content == "calc.py:2: return a + b"
    assert "Run the tests first." in call_tool(ctx, "load_skill", {"name": "fix-ci"}).content
    assert call_tool(ctx, "load_skill", {"name": "nope"}).is_error
    read_only = ToolContext(worktree=worktree, env={}, redactor=Redactor([]), read_only=True)
    assert call_tool(read_only, "write_file", {"path": "y", "content": ""}).is_error
    assert call_tool(ctx, "nonsense", {}).is_error


def test_run_uses_the_given_env_and_stops_at_ask_patterns(worktree: Path) -> None:
    env = {"PATH": os.environ["PATH"], "VISIBLE": "yes"}
    ctx = ToolContext(worktree=worktree, env=env, redactor=Redactor([]), ask=("git push",))
    ran = call_tool(
        ctx, "run", {"argv": [sys.executable, "-c", "import os; print(sorted(os.environ))"]}
    )
    assert ran.content.startswith("exit code 0")
    assert "'VISIBLE'" in ran.content
    asked = call_tool(ctx, "run", {"argv": ["git", "push", "origin", "main"]})
    assert asked.needs_approval == ("git", "push", "origin", "main")
    assert asked.pattern == "git push"
    assert ask_match(("/usr/bin/git", "push", "-f"), ("git push",)) == "git push"
    assert ask_match(("bash", "-c", "cd x && git push"), ("git push",)) == "git push"
    assert ask_match(("rm", "-rf", "build"), ("rm -rf *",)) == "rm -rf *"
    assert ask_match(("git", "pushy"), ("git push",)) is None
    assert ask_match(("git", "status"), ("git push",)) is None


def test_backoff_is_capped_and_honours_retry_after() -> None:
    policy = RetryPolicy(max_retries=9, base_s=1.0, cap_s=30.0)
    assert [backoff(n, policy, None) for n in (1, 2, 3, 6)] == [1.0, 2.0, 4.0, 30.0]
    assert backoff(1, policy, 7.5) == 7.5
    assert backoff(1, policy, 600.0) == 30.0
    assert retry_after({"retry-after": "3"}) == 3.0
    assert retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480) == 10
    assert retry_after({}) is None


def test_proxies_apply_to_remote_apis_only() -> None:
    assert uses_environment("https://api.openai.com/v1")
    assert not uses_environment("http://127.0.0.1:11434/v1")
    assert not uses_environment("http://localhost:8080")


# --- sessions ------------------------------------------------------------------------------------


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_scripted_session_reads_edits_and_runs_the_check(
    model_server: ScriptedModelServer,
    worktree: Path,
    wire: str,
) -> None:
    model_server.script = fix_script
    model_server.key = KEY
    result = run_session(config(model_server, wire, worktree))
    assert result.status == "ok", result
    assert result.text == "Fixed add(); the check passes."
    assert "return a + b" in (worktree / "calc.py").read_text()
    posts = model_server.posts()
    assert len(posts) == 4
    assert result.turns == 4
    last = posts[-1]
    assert "exit code 0" in last.request.tool_results[-1]
    if wire == "openai":
        assert last.path == "/v1/chat/completions"
        assert last.headers["authorization"] == secret_digest(f"Bearer {KEY}")
        assert {t["function"]["name"] for t in last.body["tools"]} >= {"read_file", "run"}
        assert last.body["messages"][0]["role"] == "system"
        assert (result.input_tokens, result.cached_tokens, result.output_tokens) == (400, 200, 80)
    else:
        assert last.path == "/v1/messages"
        assert last.headers["x-api-key"] == secret_digest(KEY)
        assert last.headers["anthropic-version"] == "2023-06-01"
        assert last.body["max_tokens"] > 0
        assert "Keep changes minimal." in last.body["system"]
        # input counts fresh, cache-read and cache-write tokens
        assert (result.input_tokens, result.cached_tokens, result.output_tokens) == (460, 40, 80)
    for seen in posts:  # the key is only ever in the header
        assert KEY.encode() not in seen.raw
    transcript = (worktree.parent / "logs" / "maker.out").read_text()
    assert "call edit_file" in transcript
    assert KEY not in transcript


def test_rate_limit_then_success_is_retried(
    model_server: ScriptedModelServer,
    worktree: Path,
) -> None:
    model_server.script = fix_script
    model_server.queue = [
        Reply(429, {"error": {"message": "slow down"}}, {"retry-after": "0"}),
        Reply(529, {"type": "error", "error": {"message": "overloaded"}}, {"retry-after": "0"}),
    ]
    result = run_session(config(model_server, "anthropic", worktree))
    assert result.status == "ok"
    assert result.retries == 2
    notes = (worktree.parent / "logs" / "maker.err").read_text()
    assert "429" in notes
    assert "slow down" in notes
    assert "529" in notes


def test_a_reset_beyond_the_retry_cap_ends_the_turn_at_once_with_its_wait(
    model_server: ScriptedModelServer,
    worktree: Path,
) -> None:
    """Issue 30: an hour's Retry-After is not slept inside a turn; the turn ends and says how
    long the backend asked for, and its loops pause (backends.rate_limits) instead."""
    model_server.script = fix_script
    model_server.queue = [Reply(429, {"error": {"message": "slow down"}}, {"retry-after": "3600"})]
    result = run_session(config(model_server, "anthropic", worktree))
    assert result.status == "error"
    assert result.retries == 0
    assert len(model_server.posts()) == 1
    assert (result.error_status, result.retry_after_s) == (429, 3600.0)


def test_the_wait_is_read_from_retry_after_or_the_rate_limit_headers() -> None:
    now = 1_800_000_000.0
    assert reset_after({"retry-after": "7"}, now) == 7.0
    assert reset_after({"retry-after-ms": "250"}, now) == 0.25
    later = "2027-01-15T08:00:30Z"  # RFC 3339, as Anthropic sends it
    at = datetime.fromisoformat(later).timestamp()
    headers = {"anthropic-ratelimit-tokens-reset": later, "anthropic-ratelimit-requests-reset": "x"}
    assert reset_after(headers, now) == at - now
    assert reset_after({"x-ratelimit-reset-requests": "6m0s"}, now) == 360.0
    assert reset_after({"x-ratelimit-reset-tokens": "120ms"}, now) == pytest.approx(0.12)
    assert reset_after({}, now) is None


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_a_500_storm_gives_up_after_the_retries(
    model_server: ScriptedModelServer,
    worktree: Path,
    wire: str,
) -> None:
    model_server.script = fix_script
    model_server.queue = [Reply(500, {"error": {"message": "boom"}}) for _ in range(10)]
    result = run_session(config(model_server, wire, worktree))
    assert result.status == "error"
    assert result.stop == "api"
    assert "answered 500: boom" in (result.error or "")
    assert "gave up after 4 tries" in (result.error or "")
    assert len(model_server.posts()) == 4  # 1 + max_retries
    assert (worktree / "calc.py").read_text() == CALC


def test_a_client_error_is_not_retried(
    model_server: ScriptedModelServer,
    worktree: Path,
) -> None:
    model_server.script = fix_script
    model_server.key = "another-key-0123456789"
    result = run_session(config(model_server, "openai", worktree))
    assert result.status == "error"
    assert "401" in (result.error or "")
    assert len(model_server.posts()) == 1


@pytest.mark.parametrize(
    ("body", "expected"),
    [("this is not json", "not JSON"), ({"id": "x", "object": "chat"}, "no 'choices'")],
)
def test_a_malformed_reply_is_an_error_result(
    model_server: ScriptedModelServer,
    worktree: Path,
    body: Any,
    expected: str,
) -> None:
    model_server.script = lambda r, s: Reply(200, body)
    result = run_session(config(model_server, "openai", worktree))
    assert result.status == "error"
    assert expected in (result.error or "")
    assert len(model_server.posts()) == 1


def test_turn_limit_stops_the_session(
    model_server: ScriptedModelServer,
    worktree: Path,
) -> None:
    model_server.script = lambda r, s: openai_reply(calls=[("list_files", {})])
    result = run_session(config(model_server, "openai", worktree, max_turns=3))
    assert result.status == "error"
    assert result.stop == "max_turns"
    assert result.turns == 3
    assert len(model_server.posts()) == 3


def test_the_key_never_reaches_a_tool_a_prompt_or_a_log(
    model_server: ScriptedModelServer,
    worktree: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from loopctl.backends import AgentStatus, backend_for
    from loopctl.definitions.agents import Backend

    def script(request: Request, server: ScriptedModelServer) -> Reply:
        results = request.tool_results
        if not results:
            dump = "import os, sys; print(dict(os.environ)); print(open(sys.argv[1]).read())"
            return anthropic_reply(calls=[("run", {"argv": [sys.executable, "-c", dump, "k"]})])
        return anthropic_reply(text=f"I saw: {results[-1][:3000]}")

    # A variable name without KEY/TOKEN in it: only the backend knows it holds a secret.
    monkeypatch.setenv("MODEL_CREDS", KEY)
    monkeypatch.setenv("OTHER_SECRET", "canary-other-0123456789")
    (worktree / "k").write_text(f"the key file says {KEY}\n")
    model_server.script = script
    model_server.key = KEY
    agent = make_agent(
        Backend.ANTHROPIC,
        tmp_path,
        model="claude-test",
        base_url=model_server.url,
        api_key_env="MODEL_CREDS",
        env_allow=("MODEL_CREDS",),  # what the loader adds for api_key_env
    )
    request = make_request(agent, worktree)
    assert request.env["MODEL_CREDS"] == KEY
    result = backend_for(agent).run(request)
    assert result.status is AgentStatus.OK, result
    seen_by_tool = model_server.posts()[-1].request.tool_results[-1]
    assert "MODEL_CREDS" not in seen_by_tool  # the key's variable never reaches a tool
    assert "OTHER_SECRET" not in seen_by_tool
    assert "canary-other" not in seen_by_tool
    assert "[REDACTED]" in seen_by_tool  # the key in a file is redacted before it is sent
    for seen in model_server.posts():
        assert KEY.encode() not in seen.raw
        assert seen.headers["x-api-key"] == secret_digest(KEY)
    assert KEY not in json.dumps(result.event_data())
    for path in request.stdout_path.parent.iterdir():
        assert KEY not in path.read_text(), path


def test_compaction_keeps_rules_and_goal_verbatim_over_100_tool_turns(
    model_server: ScriptedModelServer,
    worktree: Path,
) -> None:
    (worktree / "big.txt").write_text("".join(f"line {n}: {'x' * 60}\n" for n in range(120)))
    rules = "- Never edit tests.\n- Keep the public API of calc.py unchanged."
    prompt = f"# Task calc\nFix add().\n\n# Goal\ntests green and lint clean\n\n# Rules\n{rules}"

    def script(request: Request, server: ScriptedModelServer) -> Reply:
        # Compaction folds old tool results away: count requests, not results in the body.
        turns = len(server.posts()) - 1
        if turns >= 100:
            return openai_reply(text="done")
        if turns % 10 == 9:
            return openai_reply(calls=[("run", {"argv": CHECK})])
        if turns % 10 == 5:
            edit = {"path": "calc.py", "old": "return a", "new": "return  a"}
            return openai_reply(text=f"step {turns}", calls=[("edit_file", edit)])
        return openai_reply(text=f"step {turns}", calls=[("read_file", {"path": "big.txt"})])

    model_server.script = script
    window = 12_000
    result = run_session(
        config(
            model_server, "openai", worktree, prompt=prompt, context_window=window, max_turns=150
        )
    )
    assert result.status == "ok"
    assert result.turns == 101
    assert result.compactions > 0
    assert max(result.request_tokens) <= window
    last = model_server.posts()[-1].body
    system, first = last["messages"][0]["content"], last["messages"][1]["content"]
    assert "Keep changes minimal." in system
    assert first.startswith(prompt)  # the task, goal and rules, word for word
    checkpoint = first[len(prompt) :]
    assert "## Goal\ntests green and lint clean" in checkpoint
    assert rules in checkpoint
    assert "## Files changed so far\n- calc.py" in checkpoint
    assert "## Last failures" in checkpoint
    assert "add is wrong" in checkpoint
    # Without compaction the same session sends far more.
    uncompacted = sum(result.request_tokens)
    assert uncompacted < 101 * window


def test_no_compaction_when_the_window_is_roomy(
    model_server: ScriptedModelServer,
    worktree: Path,
) -> None:
    model_server.script = fix_script
    result = run_session(config(model_server, "openai", worktree, context_window=1_000_000))
    assert result.compactions == 0
    body = json.dumps(model_server.posts()[-1].body)
    assert "Checkpoint" not in body
