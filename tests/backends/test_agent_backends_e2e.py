"""Agent backends through the real CLI: `loopctl goal` with a CLI preset and with model APIs,
per-role agents, approvals, accounting in status and STATE.md, and `loopctl agents test`."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.backends import (
    fake_calls,
    install_fake_clis,
    own_agent_fixes_calc,
    reply_for,
    set_scenario,
)
from support.cli import invoke
from support.journal import events
from support.model_server import Reply, Request, ScriptedModelServer
from support.repos import (
    FAST_CHECK,
    GOAL_BRANCH,
    all_text_under,
    git,
    make_project,
    toml_value,
    worktree_root,
    write_config,
)


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


TASK = "tests-green"
KEY = "sk-canary-e2e-0123456789abcdef"
OTHER = "canary-unrelated-0123456789"


def write_backend_agent(repo: Path, name: str, body: str) -> None:
    # The fake CLIs record their calls in ~/.fake-cli: granted as a user grants a real CLI an
    # extra state folder, so the sandbox stays on for these runs.
    sandbox = '\n[sandbox]\nwrite = ["~/.fake-cli"]\n' if "[sandbox]" not in body else ""
    (repo / "agents" / f"{name}.toml").write_text(f'description = "{name}"\n' + body + sandbox)


def use_maker(repo: Path, name: str, extra: str = "") -> None:
    write_config(
        repo,
        f'version = 1\n\n[defaults]\nmaker = "{name}"\n\n'
        f'[conditions]\n"tests green" = {toml_value(FAST_CHECK)}\n' + extra,
    )


def fix_calc(request: Request, server: ScriptedModelServer) -> Reply:
    reply = reply_for(request)
    messages = request.body["messages"]
    first = messages[1 if messages[0]["role"] == "system" else 0]["content"]
    if "# You are the checker" in str(first):
        return reply(text=server.verdict)  # type: ignore[attr-defined]
    return own_agent_fixes_calc(request, FAST_CHECK)


# --- a CLI preset end to end ----------------------------------------------------------------------


def test_goal_with_the_claude_preset_fixes_calc_and_accounts_per_backend(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_fake_clis(tmp_path / "bin", monkeypatch)
    make_project(repo)
    write_backend_agent(
        repo,
        "claude-maker",
        'backend = "claude"\nmodel = "sonnet"\nmax_turns = 12\nresume = true\n'
        'env.allow = ["ANTHROPIC_API_KEY"]\ndeveloper_instructions = "Keep it small."\n',
    )
    use_maker(repo, "claude-maker")
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("UNRELATED_SECRET", OTHER)
    set_scenario("claude", mode="echo_secret")  # fixes calc.py and prints its key

    result = invoke(monkeypatch, repo, "goal", "tests green")

    assert result.exit_code == 0, result.output
    assert "return a + b" in git(repo, "show", f"{GOAL_BRANCH}:calc.py")
    call = fake_calls("claude")[-1]
    assert call["cwd"].startswith(str(worktree_root()))
    assert call["argv"][call["argv"].index("--max-turns") + 1] == "12"
    assert "UNRELATED_SECRET" not in call["env"]
    finished = events(repo, "agent_finished", TASK)
    assert len(finished) == 1
    data = finished[0].data
    assert data["backend"] == "claude"
    assert data["status"] == "ok"
    assert (data["input_tokens"], data["output_tokens"], data["cached_tokens"]) == (540, 60, 200)
    assert data["cost_usd"] == 0.003
    assert data["cost_source"] == "backend"
    assert data["session_id"]
    state = (repo / ".loop" / "STATE.md").read_text()
    assert "spend by backend: claude 600 tokens $0.0030" in state
    status = json.loads(invoke(monkeypatch, repo, "status", "--json").stdout)
    spend = next(s for s in status["status"] if s["loop"] == "goal")["spend"]
    assert spend["by_backend"]["claude"] == {
        "tokens": 600, "usd": 0.003, "calls": 1, "unpriced_calls": 0,
    }  # fmt: skip
    assert spend["by_task"][TASK]["claude"]["tokens"] == 600
    text = invoke(monkeypatch, repo, "status").stdout
    assert f"goal/{TASK}: claude 600 tokens $0.0030" in text
    for path, content in all_text_under(repo / ".loop"):
        assert KEY not in content, path  # the key claude printed is redacted everywhere
        assert OTHER not in content, path


def test_a_missing_cli_is_refused_before_any_worktree(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo)
    write_backend_agent(repo, "codex-maker", 'backend = "codex"\n')
    use_maker(repo, "codex-maker")
    monkeypatch.setenv("PATH", str(tmp_path / "empty") + ":/usr/bin:/bin")

    result = invoke(monkeypatch, repo, "goal", "tests green")

    assert result.exit_code == 1
    assert "needs the codex CLI" in result.output
    assert "npm install -g @openai/codex" in result.output
    assert "Traceback" not in result.output
    assert events(repo, "worktree_created") == []
    assert not worktree_root().exists() or not any(worktree_root().rglob(TASK))


# --- model APIs, per role -------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["openai", "anthropic"])
def test_goal_with_a_model_api_maker_and_priced_tokens(
    repo: Path,
    monkeypatch: pytest.MonkeyPatch,
    model_server: ScriptedModelServer,
    backend: str,
) -> None:
    model_server.script = fix_calc
    model_server.key = KEY
    make_project(repo)
    base = model_server.url + ("/v1" if backend == "openai" else "")
    model = "gpt-test" if backend == "openai" else "claude-test"
    write_backend_agent(
        repo,
        "api-maker",
        f'backend = "{backend}"\nmodel = "{model}"\nbase_url = "{base}"\n'
        'api_key_env = "CANARY_API_KEY"\ndeveloper_instructions = "Keep changes minimal."\n',
    )
    use_maker(repo, "api-maker", f'\n[prices."{model}"]\ninput = 3.0\noutput = 15.0\n')
    monkeypatch.setenv("CANARY_API_KEY", KEY)
    monkeypatch.setenv("UNRELATED_SECRET", OTHER)

    result = invoke(monkeypatch, repo, "goal", "tests green")

    assert result.exit_code == 0, result.output
    assert "return a + b" in git(repo, "show", f"{GOAL_BRANCH}:calc.py")
    data = events(repo, "agent_finished", TASK)[0].data
    assert data["backend"] == backend
    assert data["status"] == "ok"
    assert data["turns"] == 4
    tokens_in = 400 if backend == "openai" else 460
    assert data["input_tokens"] == tokens_in
    assert data["output_tokens"] == 80
    assert data["cost_source"] == f"prices.{model}"
    cached = 200 if backend == "openai" else 40
    expected = ((tokens_in - cached) * 3.0 + cached * 3.0 + 80 * 15.0) / 1e6
    assert data["cost_usd"] == pytest.approx(expected)
    for seen in model_server.posts():
        assert KEY.encode() not in seen.raw
        assert OTHER.encode() not in seen.raw
    for path, content in all_text_under(repo / ".loop"):
        assert KEY not in content, path
        assert OTHER not in content, path


@pytest.mark.parametrize(
    ("verdict", "code", "reason"),
    [
        ('Looks right.\n{"met": true, "reason": "add() returns the sum"}', 0, None),
        ("I think it is probably fine now.", 1, "gave no parsable verdict"),
        ('{"met": "yes"}', 1, "gave no parsable verdict"),
    ],
)
def test_the_judge_can_be_any_backend_and_an_unreadable_answer_is_not_met(
    repo: Path,
    monkeypatch: pytest.MonkeyPatch,
    model_server: ScriptedModelServer,
    verdict: str,
    code: int,
    reason: str | None,
) -> None:
    model_server.script = fix_calc
    model_server.verdict = verdict  # type: ignore[attr-defined]
    make_project(repo)  # the maker is the fake command agent fixer.py
    write_backend_agent(
        repo,
        "judge",
        f'backend = "anthropic"\nmodel = "claude-test"\nbase_url = "{model_server.url}"\n'
        'api_key_env = "JUDGE_API_KEY"\n',
    )
    monkeypatch.setenv("JUDGE_API_KEY", KEY)

    result = invoke(
        monkeypatch,
        repo,
        "goal",
        "add returns the sum of its arguments",
        "--checker-agent",
        "judge",
        "--max-iterations",
        "1",
    )

    assert result.exit_code == code, result.output
    checked = events(repo, "check_finished")
    assert checked
    assert checked[-1].data["source"] == "judge"
    if reason:
        assert reason in checked[-1].data["reason"]
        assert checked[-1].data["passed"] is False
    judged = [e for e in events(repo, "agent_finished") if e.data["role"] == "checker"]
    assert judged[0].data["backend"] == "anthropic"
    # The judge got read-only tools.
    tools = {t["name"] for t in model_server.posts()[-1].body["tools"]}
    assert "edit_file" not in tools
    assert "read_file" in tools


def asking_maker(
    repo: Path, model_server: ScriptedModelServer, marker: Path, then: str
) -> list[str]:
    """A project whose openai maker first runs a `git-push` stand-in its `ask` list gates.

    The stand-in appends "x" to `marker` each time it really runs; returns its argv.
    """
    push = [sys.executable, "-c", f"open({str(marker)!r}, 'a').write('x')", "git-push"]

    def script(request: Request, server: ScriptedModelServer) -> Reply:
        reply = reply_for(request)
        if not request.tool_results:
            return reply(text="Publishing.", calls=[("run", {"argv": push})])
        return reply(text=then)

    model_server.script = script
    make_project(repo)
    write_backend_agent(
        repo,
        "api-maker",
        f'backend = "openai"\nmodel = "gpt-test"\nbase_url = "{model_server.url}"\n'
        f"ask = [{json.dumps(' '.join(['*python*', '-c', '*git-push*']))}]\n"
        # The stand-in's record lies outside the worktree: granted like a real push's target.
        f"\n[sandbox]\nwrite = [{json.dumps(str(marker.parent))}]\n",
    )
    use_maker(repo, "api-maker")
    return push


def test_a_command_matching_ask_opens_an_approval_instead_of_running(
    repo: Path,
    monkeypatch: pytest.MonkeyPatch,
    model_server: ScriptedModelServer,
) -> None:
    marker = repo.parent / "pushed"
    push = asking_maker(repo, model_server, marker, "should not get here")

    result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")

    assert result.exit_code == 1
    assert not marker.exists()  # the gated command never ran
    # The task pauses for the human: no check runs and no failed attempt is counted.
    assert [e.data["status"] for e in events(repo, "task_finished", TASK)] == ["paused"]
    assert events(repo, "check_finished", TASK) == []
    assert [e.data["verdict"] for e in events(repo, "attempt_finished", TASK)] == [
        "awaiting_approval"
    ]
    assert len(model_server.posts()) == 1  # the turn ended at the request
    finished = events(repo, "agent_finished", TASK)[0].data
    assert finished["status"] == "approval"
    assert finished["stop"] == "approval"
    approvals = [e for e in events(repo, "inbox_opened") if e.data["kind"] == "approval"]
    assert len(approvals) == 1
    evidence = approvals[0].data["evidence"]
    assert evidence["argv"] == push
    assert evidence["agent"] == "api-maker"
    assert finished["approval_item"] == approvals[0].data["id"]
    inbox = json.loads(invoke(monkeypatch, repo, "inbox", "--json").stdout)
    assert any(item["kind"] == "approval" for item in inbox["inbox"])


def test_after_approving_an_ask_the_suggested_retry_runs_the_task_with_it(
    repo: Path,
    monkeypatch: pytest.MonkeyPatch,
    model_server: ScriptedModelServer,
) -> None:
    marker = repo.parent / "pushed"
    asking_maker(repo, model_server, marker, "Published.")
    use_maker(repo, "api-maker")

    assert invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1").exit_code == 1
    (item,) = [e.data["id"] for e in events(repo, "inbox_opened") if e.data["kind"] == "approval"]
    (paused,) = events(repo, "task_finished", TASK)
    hint = f"`loopctl inbox approve {item}`; then `loopctl inbox retry {item}`"
    assert hint in paused.data["reason"]

    approved = invoke(monkeypatch, repo, "inbox", "approve", item)
    assert approved.exit_code == 0, approved.output
    assert f"`loopctl inbox retry {item}` runs the task again" in approved.stdout
    retried = invoke(monkeypatch, repo, "inbox", "retry", item)

    assert "already closed" not in retried.output
    assert "instead of `retry`" not in retried.output
    (requeued,) = events(repo, "task_requeued")
    assert requeued.data["item"] == item
    assert marker.read_text() == "x"  # the approved command ran, once, in the retried run
    used = [e.data.get("approvals_used") for e in events(repo, "agent_finished", TASK)]
    assert [item] in used


# --- loopctl agents test --------------------------------------------------------------------------


def test_agents_test_checks_cli_and_api_without_doing_work(
    repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    model_server: ScriptedModelServer,
) -> None:
    install_fake_clis(tmp_path / "bin", monkeypatch)
    model_server.key = KEY
    (repo / "agents").mkdir()
    write_backend_agent(repo, "cc", 'backend = "claude"\nenv.allow = ["ANTHROPIC_API_KEY"]\n')
    write_backend_agent(
        repo,
        "api",
        f'backend = "openai"\nmodel = "gpt-test"\nbase_url = "{model_server.url}/v1"\n'
        'api_key_env = "CANARY_API_KEY"\n',
    )
    write_backend_agent(
        repo,
        "api-unlisted",
        f'backend = "anthropic"\nmodel = "claude-nope"\nbase_url = "{model_server.url}"\n'
        'api_key_env = "CANARY_API_KEY"\n',
    )
    monkeypatch.setenv("CANARY_API_KEY", KEY)

    cli = invoke(monkeypatch, repo, "agents", "test", "cc")
    assert cli.exit_code == 0, cli.output
    assert "ok   version: 2.1.197 (Claude Code)" in cli.stdout
    assert "warn credentials" in cli.stdout
    assert "ready" in cli.stdout
    assert fake_calls("claude") == []  # only `claude --version` ran, which does no work

    api = json.loads(invoke(monkeypatch, repo, "agents", "test", "api", "--json").stdout)
    assert api["version"] == 1
    assert api["agent_test"]["ok"] is True
    checks = {c["name"]: c for c in api["agent_test"]["checks"]}
    assert checks["api"]["detail"].endswith("/v1/models answered 200")
    assert checks["model"]["detail"] == "gpt-test is listed"
    assert model_server.posts() == []  # no completion was asked for
    unlisted = invoke(monkeypatch, repo, "agents", "test", "api-unlisted")
    assert unlisted.exit_code == 0
    assert "warn model: claude-nope is not listed" in unlisted.stdout

    monkeypatch.setenv("CANARY_API_KEY", "sk-wrong-0123456789")
    rejected = invoke(monkeypatch, repo, "agents", "test", "api")
    assert rejected.exit_code == 1
    assert "rejected the key (401)" in rejected.stdout
    monkeypatch.delenv("CANARY_API_KEY")
    unset = invoke(monkeypatch, repo, "agents", "test", "api")
    assert unset.exit_code == 1
    assert "$CANARY_API_KEY is not set" in unset.stdout
    assert KEY not in rejected.output + unset.output + cli.output

    listing = json.loads(invoke(monkeypatch, repo, "agents", "--json").stdout)
    assert {a["name"] for a in listing["agents"]} == {"cc", "api", "api-unlisted"}


def test_a_model_api_agent_without_its_key_is_refused_before_any_worktree(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo)
    write_backend_agent(
        repo, "api-maker", 'backend = "anthropic"\nmodel = "m"\napi_key_env = "MISSING_KEY"\n'
    )
    use_maker(repo, "api-maker")
    monkeypatch.delenv("MISSING_KEY", raising=False)

    result = invoke(monkeypatch, repo, "goal", "tests green")

    assert result.exit_code == 1
    assert "$MISSING_KEY, which is not set" in result.output
    assert events(repo, "worktree_created") == []


def test_an_approved_command_runs_once_on_the_next_run_then_needs_approval_again(
    repo: Path,
    monkeypatch: pytest.MonkeyPatch,
    model_server: ScriptedModelServer,
) -> None:
    marker = repo.parent / "pushes"
    asking_maker(repo, model_server, marker, "Published.")

    def goal() -> None:
        invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")

    def approvals() -> list[str]:
        return [e.data["id"] for e in events(repo, "inbox_opened") if e.data["kind"] == "approval"]

    goal()
    (first,) = approvals()
    assert not marker.exists()
    approve = invoke(monkeypatch, repo, "inbox", "approve", first)
    assert approve.exit_code == 0, approve.stdout + approve.stderr

    goal()  # the approved command, exactly as shown, runs once
    assert marker.read_text() == "x"
    used = [e.data.get("approvals_used") for e in events(repo, "agent_finished", TASK)]
    assert used[-1] == [first]
    assert len(approvals()) == 1

    goal()  # spent: the same command asks again
    assert marker.read_text() == "x"
    assert len(approvals()) == 2
