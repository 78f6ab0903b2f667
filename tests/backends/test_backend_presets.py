"""CLI presets: the argv loopctl builds, and each CLI's real output format normalised.

Fake CLIs named like the real ones (tests/fake_clis/) sit first on PATH; they accept the real
flags, reject the removed ones, record how they were called and print the real output shapes.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from support.backends import fake_calls, install_fake_clis, make_agent, make_request, set_scenario

from loopctl.backends import AgentStatus, backend_for
from loopctl.backends.pricing import priced
from loopctl.definitions.agents import Backend
from loopctl.definitions.config import Price
from loopctl.errors import AgentUnavailable

CALC = "def add(a, b):\n    return a - b\n"


@pytest.fixture
def worktree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    install_fake_clis(tmp_path / "bin", monkeypatch)
    folder = tmp_path / "wt"
    folder.mkdir()
    (folder / "calc.py").write_text(CALC)
    return folder


def fixed(worktree: Path) -> bool:
    return "return a + b" in (worktree / "calc.py").read_text()


# --- claude --------------------------------------------------------------------------------------


def test_claude_argv_and_result(worktree: Path, tmp_path: Path) -> None:
    agent = make_agent(
        Backend.CLAUDE,
        tmp_path,
        model="sonnet",
        max_turns=7,
        instructions="Keep it small.",
        args=("--verbose",),
    )
    result = backend_for(agent).run(make_request(agent, worktree))
    argv = fake_calls("claude")[-1]["argv"]
    assert argv[:2] == ["-p", "# Task calc (attempt 1)\nFix add() in calc.py.\n"]
    assert argv[2:] == [
        "--output-format", "json",
        "--permission-mode", "acceptEdits",
        "--model", "sonnet",
        "--max-turns", "7",
        "--append-system-prompt", "Keep it small.",
        "--verbose",
    ]  # fmt: skip
    assert result.status is AgentStatus.OK
    assert fixed(worktree)
    assert result.text == "Fixed add()."
    assert result.session_id
    assert len(result.session_id) == 36
    # input counts fresh + cache writes + cache reads; cached is the cache reads
    assert (result.input_tokens, result.output_tokens, result.cached_tokens) == (540, 60, 200)
    assert result.cost_usd == 0.003
    assert result.extra["turns"] == 3
    assert result.extra["model"] == "claude-opus-4-8[1m]"


def test_claude_checker_runs_in_default_permission_mode(worktree: Path, tmp_path: Path) -> None:
    set_scenario("claude", mode="judge")
    agent = make_agent(Backend.CLAUDE, tmp_path)
    result = backend_for(agent).run(make_request(agent, worktree, role="checker"))
    argv = fake_calls("claude")[-1]["argv"]
    assert argv[argv.index("--permission-mode") + 1] == "default"
    assert result.text.endswith('{"met": true, "reason": "add() adds"}')


@pytest.mark.parametrize(
    ("mode", "stop", "error"),
    [
        ("not_logged_in", None, "Not logged in"),
        ("rate_limited", None, "429"),
        ("max_turns", "max_turns", None),
        ("budget", "budget", None),
    ],
)
def test_claude_failure_shapes(
    worktree: Path, tmp_path: Path, mode: str, stop: str | None, error: str | None
) -> None:
    set_scenario("claude", mode=mode)
    agent = make_agent(Backend.CLAUDE, tmp_path, max_turns=1)
    result = backend_for(agent).run(make_request(agent, worktree))
    assert result.status is AgentStatus.ERROR
    assert result.exit_code == 1
    assert result.extra.get("stop") == stop
    if error:
        assert error in result.extra["error"]


def test_claude_denied_tool_is_a_finished_turn_with_the_denials_recorded(
    worktree: Path, tmp_path: Path
) -> None:
    set_scenario("claude", mode="denied")
    agent = make_agent(Backend.CLAUDE, tmp_path)
    result = backend_for(agent).run(make_request(agent, worktree))
    assert result.status is AgentStatus.OK  # exit 0, is_error false: the check decides
    assert result.extra["permission_denials"] == 1
    assert result.extra["denied_tools"] == ["Edit"]
    assert not fixed(worktree)


def test_claude_resumes_a_recorded_session_and_refuses_an_option_as_session(
    worktree: Path, tmp_path: Path
) -> None:
    agent = make_agent(Backend.CLAUDE, tmp_path, resume=True)
    backend = backend_for(agent)
    first = backend.run(make_request(agent, worktree))
    second = backend.run(make_request(agent, worktree, session_id=first.session_id, attempt=2))
    argv = fake_calls("claude")[-1]["argv"]
    assert argv[argv.index("--resume") + 1] == first.session_id == second.session_id
    backend.run(
        make_request(agent, worktree, session_id="--dangerously-skip-permissions", attempt=3)
    )
    argv = fake_calls("claude")[-1]["argv"]
    assert "--resume" not in argv
    assert "--dangerously-skip-permissions" not in argv


# --- codex ---------------------------------------------------------------------------------------


def test_codex_argv_prompt_on_stdin_and_tokens_priced(worktree: Path, tmp_path: Path) -> None:
    agent = make_agent(Backend.CODEX, tmp_path, model="gpt-5.5", instructions="Be brief.")
    request = make_request(agent, worktree)
    result = backend_for(agent).run(request)
    call = fake_calls("codex")[-1]
    assert call["argv"] == [
        "exec", "--json", "--sandbox", "workspace-write", "-C", str(worktree),
        "-m", "gpt-5.5", "-",
    ]  # fmt: skip
    assert "--full-auto" not in call["argv"]
    assert call["stdin"] == "Be brief.\n\n" + request.prompt  # instructions were not in it
    assert result.status is AgentStatus.OK
    assert fixed(worktree)
    assert result.text == "Fixed add()."
    assert result.session_id
    assert result.extra["turns"] == 1
    assert (result.input_tokens, result.cached_tokens, result.output_tokens) == (24763, 24448, 122)
    assert result.cost_usd is None  # codex reports no USD …
    prices = {"gpt-5.5": Price(input=1.25, output=10.0, cached_input=0.125)}
    with_cost = priced(result, agent, prices)  # … so the price table sets it
    expected = ((24763 - 24448) * 1.25 + 24448 * 0.125 + 122 * 10.0) / 1e6
    assert with_cost.cost_usd == pytest.approx(expected)
    assert with_cost.extra["cost_source"] == "prices.gpt-5.5"
    unpriced = priced(result, agent, {})
    assert unpriced.cost_usd is None
    assert '[prices."gpt-5.5"]' in unpriced.extra["cost_note"]


def test_codex_checker_is_read_only_and_resume_uses_the_thread(
    worktree: Path, tmp_path: Path
) -> None:
    agent = make_agent(Backend.CODEX, tmp_path, model="fake-model")
    backend = backend_for(agent)
    first = backend.run(make_request(agent, worktree))
    # An "error" item about unknown model metadata is a warning, not a failure.
    assert first.status is AgentStatus.OK
    backend.run(make_request(agent, worktree, role="checker", session_id=first.session_id))
    argv = fake_calls("codex")[-1]["argv"]
    assert argv[argv.index("--sandbox") + 1] == "read-only"
    assert argv[-3:] == ["resume", first.session_id, "-"]


@pytest.mark.parametrize(
    ("mode", "error"),
    [("server_error", "high demand"), ("unauthorized", "401"), ("usage_limit", "usage limit")],
)
def test_codex_failure_shapes(worktree: Path, tmp_path: Path, mode: str, error: str) -> None:
    set_scenario("codex", mode=mode)
    agent = make_agent(Backend.CODEX, tmp_path)
    result = backend_for(agent).run(make_request(agent, worktree))
    assert result.status is AgentStatus.ERROR
    assert result.exit_code == 1
    assert error in result.extra["error"]
    assert result.session_id is not None


# --- opencode ------------------------------------------------------------------------------------


def test_opencode_sums_every_step_even_beyond_the_output_tail(
    worktree: Path, tmp_path: Path
) -> None:
    agent = make_agent(Backend.OPENCODE, tmp_path, model="fake/fake-model")
    result = backend_for(agent).run(make_request(agent, worktree))
    argv = fake_calls("opencode")[-1]["argv"]
    assert argv[:5] == ["run", "--format", "json", "-m", "fake/fake-model"]
    assert argv[-1].startswith("# Task calc")
    assert result.status is AgentStatus.OK
    assert fixed(worktree)
    assert result.text == "Fixed add()."
    assert result.session_id == "ses_dd42a1b2c3"
    # Three step_finish lines of 100 in (+10 written +20 read), 20 out, $0.0006 each.
    assert (result.input_tokens, result.cached_tokens, result.output_tokens) == (390, 60, 60)
    assert result.cost_usd == pytest.approx(0.0018)
    assert result.extra["turns"] == 3


def test_opencode_error_rejection_and_no_price(worktree: Path, tmp_path: Path) -> None:
    agent = make_agent(Backend.OPENCODE, tmp_path)
    backend = backend_for(agent)
    set_scenario("opencode", mode="api_error")
    failed = backend.run(make_request(agent, worktree))
    assert failed.status is AgentStatus.ERROR
    assert failed.extra["error"] == "bad key (HTTP 401)"
    set_scenario("opencode", mode="rejected")
    rejected = backend.run(make_request(agent, worktree))
    assert rejected.status is AgentStatus.OK  # exit 0; the check will find nothing changed
    assert "rejected permission" in rejected.extra["tool_errors"][0]
    set_scenario("opencode", mode="no_price")
    free = backend.run(make_request(agent, worktree))
    assert free.cost_usd is None
    assert free.input_tokens == 390  # 0 USD is "unknown"
    backend.run(make_request(agent, worktree, session_id="ses_earlier", attempt=2))
    argv = fake_calls("opencode")[-1]["argv"]
    assert argv[argv.index("-s") + 1] == "ses_earlier"


# --- aider ---------------------------------------------------------------------------------------


def test_aider_argv_tokens_cost_and_clean_worktree(worktree: Path, tmp_path: Path) -> None:
    agent = make_agent(Backend.AIDER, tmp_path, model="sonnet")
    request = make_request(agent, worktree)
    result = backend_for(agent).run(request)
    call = fake_calls("aider")[-1]
    argv = call["argv"]
    assert argv[:3] == ["--message-file", str(request.prompt_file), "--yes-always"]
    for flag in ("--no-auto-commits", "--no-gitignore", "--no-stream", "--no-check-update"):
        assert flag in argv
    history = Path(argv[argv.index("--chat-history-file") + 1])
    assert not history.is_relative_to(worktree)
    assert history.exists()
    assert call["stdin"] == request.prompt
    assert result.status is AgentStatus.OK
    assert fixed(worktree)
    assert (result.input_tokens, result.cached_tokens, result.output_tokens) == (2400, 800, 30)
    assert result.cost_usd == 0.0077
    assert result.session_id == str(history)
    # aider's repo-map cache is gone: loopctl would otherwise commit it.
    assert sorted(p.name for p in worktree.iterdir()) == ["calc.py"]


def test_aider_exit_zero_failure_and_resume(worktree: Path, tmp_path: Path) -> None:
    agent = make_agent(Backend.AIDER, tmp_path, resume=True)
    backend = backend_for(agent)
    runs = tmp_path / "runs"
    first = backend.run(make_request(agent, worktree, runs=runs))
    backend.run(make_request(agent, worktree, runs=runs, session_id=first.session_id, attempt=2))
    argv = fake_calls("aider")[-1]["argv"]
    assert "--restore-chat-history" in argv
    # Continued from a copy in this attempt's folder: the first attempt's file, read-only to a
    # sandboxed agent, stays as it was.
    assert first.session_id is not None
    continued = Path(argv[argv.index("--chat-history-file") + 1])
    assert continued != Path(first.session_id)
    assert continued.parent.name == "attempt-2"
    assert continued.name == Path(first.session_id).name
    # A "session" outside this task's folder is never restored.
    (tmp_path / "elsewhere.aider.chat.history.md").write_text("x")
    outside = str(tmp_path / "elsewhere.aider.chat.history.md")
    backend.run(make_request(agent, worktree, runs=runs, session_id=outside, attempt=3))
    assert "--restore-chat-history" not in fake_calls("aider")[-1]["argv"]
    set_scenario("aider", mode="auth_error")
    failed = backend.run(make_request(agent, worktree, runs=runs, attempt=4))
    assert failed.exit_code == 0
    assert failed.status is AgentStatus.ERROR
    assert "AuthenticationError" in failed.extra["error"]
    set_scenario("aider", mode="no_cost")
    free = backend.run(make_request(agent, worktree, runs=runs, attempt=5))
    assert free.status is AgentStatus.OK
    assert free.cost_usd is None
    assert free.input_tokens == 100


# --- goose ---------------------------------------------------------------------------------------


def test_goose_argv_result_and_resume(worktree: Path, tmp_path: Path) -> None:
    agent = make_agent(
        Backend.GOOSE, tmp_path, model="claude-sonnet-4-5", max_turns=9, instructions="Be brief."
    )
    backend = backend_for(agent)
    request = make_request(agent, worktree)
    result = backend.run(request)
    call = fake_calls("goose")[-1]
    argv = call["argv"]
    assert argv[:5] == ["run", "--output-format", "json", "--name", result.session_id]
    assert argv[5:] == [
        "--max-turns", "9", "--model", "claude-sonnet-4-5", "--system", "Be brief.",
        "-i", str(request.prompt_file),
    ]  # fmt: skip
    assert call["env"]["GOOSE_MODE"] == "auto"
    assert result.status is AgentStatus.OK
    assert fixed(worktree)
    assert result.text == "Fixed add()."
    assert (result.input_tokens, result.cached_tokens, result.output_tokens) == (1200, 500, 220)
    assert result.cost_usd == 0.0091
    backend.run(make_request(agent, worktree, session_id=result.session_id, attempt=2))
    argv = fake_calls("goose")[-1]["argv"]
    assert argv[3:6] == ["--resume", "--name", result.session_id]


@pytest.mark.parametrize(("mode", "stop"), [("error", None), ("max_turns", "max_turns")])
def test_goose_failure_shapes(worktree: Path, tmp_path: Path, mode: str, stop: str | None) -> None:
    set_scenario("goose", mode=mode)
    agent = make_agent(Backend.GOOSE, tmp_path, max_turns=1)
    result = backend_for(agent).run(make_request(agent, worktree))
    assert result.status is AgentStatus.ERROR
    assert result.extra.get("stop") == stop
    if mode == "error":
        assert result.exit_code == 1
        assert "500" in result.extra["error"]


# --- every preset ---------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["claude", "codex", "opencode", "aider", "goose"])
def test_missing_cli_names_the_binary_and_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    agent = make_agent(Backend(backend), tmp_path)
    with pytest.raises(AgentUnavailable) as caught:
        backend_for(agent).check_available(agent, {"PATH": str(tmp_path)})
    message = str(caught.value)
    assert f"needs the {backend} CLI" in message
    assert "install it (" in message


@pytest.mark.parametrize("backend", ["claude", "codex", "opencode", "aider", "goose"])
def test_only_allowed_credentials_reach_the_cli_and_none_reach_the_log(
    worktree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    allowed = {"claude": "ANTHROPIC_API_KEY", "codex": "CODEX_API_KEY"}.get(
        backend, "OPENAI_API_KEY"
    )
    monkeypatch.setenv(allowed, "sk-canary-allowed-0123456789")
    monkeypatch.setenv("UNRELATED_SECRET_TOKEN", "canary-withheld-0123456789")
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))  # non-secret config
    if backend == "claude":
        set_scenario("claude", mode="echo_secret")  # prints its key on stdout and stderr
    agent = make_agent(Backend(backend), tmp_path, env_allow=(allowed,))
    request = make_request(agent, worktree)
    result = backend_for(agent).run(request)
    env = fake_calls(backend)[-1]["env"]
    assert env[allowed] == "sk-canary-allowed-0123456789"
    assert "UNRELATED_SECRET_TOKEN" not in env
    assert "canary-withheld" not in json.dumps(env)
    if backend == "codex":
        assert env["CODEX_HOME"] == str(tmp_path / "codex-home")
    if backend == "claude":
        # Claude Code scrubs its subprocesses' env only inside bubblewrap, and refuses to start
        # when asked to without it: the preset asks only where bwrap is on PATH.
        wanted = "1" if shutil.which("bwrap", path=env["PATH"]) else None
        assert env.get("CLAUDE_CODE_SUBPROCESS_ENV_SCRUB") == wanted
    logs = request.stdout_path.parent
    for path in logs.iterdir():
        text = path.read_text(errors="replace")
        assert "sk-canary-allowed" not in text, path
        assert "canary-withheld" not in text, path
    assert "sk-canary" not in json.dumps(result.event_data())
    assert os.environ["PATH"].split(os.pathsep)[0] in env["PATH"]


# --- the agent keys presets read -----------------------------------------------------------------


def test_agent_keys_for_backends_are_read_and_checked(tmp_path: Path) -> None:
    from loopctl.definitions.agents import load_toml_agent
    from loopctl.definitions.source import Problems

    good = tmp_path / "good.toml"
    good.write_text(
        'backend = "openai"\nmodel = "m"\nask = ["git push"]\ncontext_window = 32000\n'
        'api_key_env = "LLM_KEY"\n'
    )
    problems = Problems()
    agent = load_toml_agent(good, problems, default_backend=None)
    assert agent is not None
    assert problems.errors == []
    assert agent.ask == ("git push",)
    assert agent.context_window == 32000
    assert "LLM_KEY" in agent.env_allow

    bad = tmp_path / "bad.toml"
    bad.write_text(
        'backend = "claude"\npermission_mode = "yolo"\nsandbox_mode = "wide-open"\n'
        'ask = ["git push"]\n'
    )
    problems = Problems()
    assert load_toml_agent(bad, problems, default_backend=None) is None
    shown = [p.render() for p in problems.errors]
    assert any(":2: " in line and "permission_mode" in line for line in shown), shown
    assert any(":3: " in line and "sandbox_mode" in line for line in shown), shown
    assert any("'ask' is enforced by loopctl's own agent" in w.message for w in problems.warnings)
