"""The real Claude Code, Codex, opencode and aider CLIs, driven by loopctl's presets.

Each test runs `loopctl` beside the scripted model server (tests/support/model_server.py),
sealed in a loopback-only network namespace when running as root, so the CLI under test can
reach nothing but that server; the server's log proves it was asked. See
tests/support/real_clis.py for the set-up.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from support.journal import events
from support.model_server import secret_digest
from support.real_cli_scripts import COMPACT_WINDOW, PEEK
from support.real_clis import (
    API_KEY,
    CLIS,
    VERSIONS,
    Sandbox,
    SealedRun,
    cli_environment,
    clis_folder,
    copy_tree,
    install_copy,
    make_sandbox,
    require_cli,
    run_sealed,
    use_real_maker,
)
from support.repos import (
    GOAL_BRANCH,
    all_text_under,
    commit_all,
    git,
    make_project,
    make_repo,
    write_loop,
)

ROOT = Path(__file__).resolve().parents[2]
TASK = "tests-green"
# What each CLI's scripted golden run costs: (input, output) tokens, and USD where known.
# claude: 3 model calls of 100/20, priced by Claude Code itself; codex: 2 calls, priced from
# loopctl's table; opencode: 3 agent calls (its title call is not reported), priced from its
# config; aider: 2 calls (it re-asks after adding calc.py to the chat), priced from its metadata.
SPEND: dict[str, tuple[int, int, float]] = {
    "claude": (300, 60, 0.003),
    "codex": (200, 40, (200 * 3.0 + 40 * 15.0) / 1e6),
    "opencode": (300, 60, 0.0018),
    "aider": (200, 40, 0.0012),
}
PRICES = '\n[prices."gpt-5.5"]\ninput = 3.0\noutput = 15.0\n'
ONE_ATTEMPT = "\n[budget]\nmax_iterations = 1\n"
# The 429s Claude Code 2.1.197 takes with CLAUDE_CODE_MAX_RETRIES=0 before it gives a turn up.
CLAUDE_429S = 1
AUTH_HEADER = {"claude": "x-api-key", "codex": "authorization", "opencode": "authorization"}


def project(repo: Path, name: str, box: Sandbox, *, config: str = PRICES, **agent: Any) -> None:
    make_project(repo)
    use_real_maker(repo, name, box, **agent)
    (repo / ".loop" / "config.toml").write_text(
        (repo / ".loop" / "config.toml").read_text() + config
    )
    commit_all(repo, f"the real {name} as maker")


def assert_sealed(run: SealedRun, box: Sandbox) -> None:
    """The model server was asked, and (as root) nothing but loopback existed."""
    assert run.posts(), f"the CLI never reached the model server:\n{run.done.stderr}"
    if box.sealed:
        assert run.interfaces == ["lo"]


def assert_stand_in_only(run: SealedRun) -> None:
    """Issue 25: inside the sandbox the CLI's key variable held a stand-in, never the real key
    (read from the host's /proc while the CLI waited for its first answer); the model server,
    which refuses any other key, was still answered, so the proxy put the real one in."""
    inside = [holder for holder in run.census if holder["sandboxed"]]
    assert inside, f"no sandboxed process held a key variable: {run.census}"
    for holder in inside:
        assert set(holder["values"].values()) == {"stand-in"}, holder


def finished_makers(repo: Path) -> list[dict[str, Any]]:
    return [dict(e.data) for e in events(repo, "agent_finished") if e.data["role"] == "maker"]


def branch_files(repo: Path, branch: str) -> list[str]:
    return git(repo, "diff", "--name-only", f"main...{branch}").split()


# --- the golden path ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CLIS)
def test_goal_with_the_real_cli_fixes_calc_and_accounts_for_it(repo: Path, name: str) -> None:
    box = make_sandbox()
    env = cli_environment(name, box)
    project(repo, name, box)

    run = run_sealed(repo, box, env, "goal", "tests green")

    assert run.done.returncode == 0, run.done.stdout + run.done.stderr
    assert_sealed(run, box)
    assert "return a + b" in git(repo, "show", f"{GOAL_BRANCH}:calc.py")
    # Only the fix is committed: no agent files (.aider*, histories), and loopctl's one commit
    # (aider's auto-commit is off; codex could not commit from its sandbox anyway).
    assert branch_files(repo, GOAL_BRANCH) == ["calc.py"]
    assert git(repo, "rev-list", "--count", f"main..{GOAL_BRANCH}").strip() == "1"
    (maker,) = finished_makers(repo)
    assert maker["backend"] == name
    assert maker["status"] == "ok"
    tokens_in, tokens_out, usd = SPEND[name]
    assert (maker["input_tokens"], maker["output_tokens"]) == (tokens_in, tokens_out)
    assert maker["cost_usd"] == pytest.approx(usd)
    assert maker["session_id"]
    # The key reached the model server, and nowhere in loopctl's own files.
    if name in AUTH_HEADER:
        header = AUTH_HEADER[name]
        sent = API_KEY if header == "x-api-key" else f"Bearer {API_KEY}"
        assert {p["headers"].get(header) for p in run.posts()} == {secret_digest(sent)}
    for path, content in all_text_under(repo / ".loop"):
        assert API_KEY not in content, path
    assert_stand_in_only(run)
    if name == "claude":
        # stdin is /dev/null: Claude Code did not wait for input that never comes.
        err = next((repo / ".loop" / "runs").rglob("maker.err")).read_text()
        assert "no stdin data received" not in err


# --- a home and the CLIs under /tmp (issue 24, item 6) ------------------------------------------
# Containers run with an arbitrary uid often have HOME=/tmp or one below it, and the CLIs are
# installed there. The sandbox's /tmp is private: it must put back the CLI's install folders
# (npm packages, aider's venv), not the rest of the host's /tmp.

SIBLING_SECRET = "a sibling in the host's /tmp, not for the agent"


@dataclass
class TmpHome:
    home: Path
    clis_bin: Path
    siblings: list[Path]  # beside the install, and directly in /tmp: hidden from the agent


@pytest.fixture(scope="session")
def clis_linkable_from_tmp() -> Iterator[Path]:
    """The installed CLIs, where /tmp can hard-link them from: the install itself when it
    shares /tmp's file system, else a real copy made once for the session."""
    installed = clis_folder()
    if not (installed / "bin").is_dir():
        require_cli("claude")  # skips, or fails under LOOPCTL_REQUIRE_REAL_CLIS=1
        reason = f"no install of scripts/install-agent-clis at {installed} to copy under /tmp"
        if os.environ.get("LOOPCTL_REQUIRE_REAL_CLIS") == "1":
            pytest.fail(reason + " (LOOPCTL_REQUIRE_REAL_CLIS=1)")
        pytest.skip(reason)
    if installed.stat().st_dev == Path("/tmp").stat().st_dev:
        yield installed
        return
    cache = Path(tempfile.mkdtemp(prefix="loopctl-clis-", dir="/tmp"))
    try:
        copy_tree(installed, cache / "agent-clis")
        yield cache / "agent-clis"
    finally:
        shutil.rmtree(cache, ignore_errors=True)


@pytest.fixture
def tmp_home(clis_linkable_from_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TmpHome]:
    """HOME a folder directly under /tmp, the CLIs installed beside it (so only what the
    sandbox finds from the program puts them back, as with HOME=/tmp itself)."""
    base = Path(tempfile.mkdtemp(prefix="loopctl-tmphome-", dir="/tmp"))
    sibling = Path(tempfile.mkstemp(prefix="loopctl-sibling-", dir="/tmp")[1])
    try:
        home = base / "home"
        home.mkdir()
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.setenv("LOOPCTL_HOME", str(home / ".loopctl"))
        for name in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
            monkeypatch.setenv(name, str(home / name.lower()))
        # Only the copy is on PATH: the test runs the CLIs under /tmp, not the user's install.
        original = str(clis_folder())
        kept = [p for p in os.environ["PATH"].split(os.pathsep) if not p.startswith(original)]
        monkeypatch.setenv("PATH", os.pathsep.join(kept))
        clis_bin = install_copy(clis_linkable_from_tmp, base / "agent-clis")
        beside = base / "secret.txt"
        for secret in (beside, sibling):
            secret.write_text(SIBLING_SECRET + "\n")
        yield TmpHome(home, clis_bin, [beside, sibling])
    finally:
        shutil.rmtree(base, ignore_errors=True)
        sibling.unlink(missing_ok=True)


@pytest.mark.parametrize("name", CLIS)
def test_goal_with_the_real_cli_installed_under_tmp_and_home_under_tmp(
    repo: Path, name: str, tmp_home: TmpHome
) -> None:
    box = make_sandbox(tmp_home.clis_bin)
    assert box.home == tmp_home.home
    env = cli_environment(name, box, **{PEEK: ":".join(map(str, tmp_home.siblings))})
    project(repo, name, box)

    # Codex first `cat`s the siblings through its shell tool; the others just fix.
    run = run_sealed(repo, box, env, "goal", "tests green", script="peek_then_fix")

    assert run.done.returncode == 0, run.done.stdout + run.done.stderr
    assert_sealed(run, box)
    assert "return a + b" in git(repo, "show", f"{GOAL_BRANCH}:calc.py")
    assert branch_files(repo, GOAL_BRANCH) == ["calc.py"]
    (maker,) = finished_makers(repo)
    assert (maker["backend"], maker["status"]) == (name, "ok")
    assert maker["session_id"]
    # The rest of the host's /tmp stayed hidden: the files are there, the agent never saw them.
    assert all(sibling.read_text().startswith(SIBLING_SECRET) for sibling in tmp_home.siblings)
    assert all(SIBLING_SECRET not in json.dumps(p["body"]) for p in run.posts())
    if name == "codex":
        peeked = next(r for q in run.model_requests() for r in q.tool_results)
        for sibling in tmp_home.siblings:
            assert f"{sibling}: No such file or directory" in peeked, peeked


@pytest.mark.parametrize("name", CLIS)
def test_run_once_with_the_real_cli_commits_on_the_loop_branch(repo: Path, name: str) -> None:
    box = make_sandbox()
    env = cli_environment(name, box)
    project(repo, name, box)
    write_loop(repo, "fixer", 'goal = "tests green"\nprompt = "Fix add() in calc.py"\n')
    commit_all(repo, "a loop")

    run = run_sealed(repo, box, env, "run", "fixer", "--once")

    assert run.done.returncode == 0, run.done.stdout + run.done.stderr
    assert_sealed(run, box)
    (done,) = [e for e in events(repo, "task_finished") if e.loop == "fixer"]
    assert done.data["status"] == "done"
    branch = f"loop/fixer/{done.task}"
    assert "return a + b" in git(repo, "show", f"{branch}:calc.py")
    assert branch_files(repo, branch) == ["calc.py"]


# --- failures through the real CLIs ------------------------------------------------------------


@pytest.mark.parametrize("name", CLIS)
def test_a_refused_key_stops_the_task_at_once_with_an_inbox_item(repo: Path, name: str) -> None:
    box = make_sandbox()
    env = cli_environment(name, box)
    project(repo, name, box)

    # The server wants another key: every request is a 401.
    run = run_sealed(repo, box, env, "goal", "tests green", key="sk-the-right-one")

    assert run.done.returncode == 1, run.done.stdout + run.done.stderr
    assert "Traceback" not in run.done.stderr
    assert_sealed(run, box)
    assert {p["status"] for p in run.posts() if p["status"] != 200} == {401}
    (maker,) = finished_makers(repo)  # one attempt: no retry storm
    assert maker["status"] == "error"  # aider exits 0 here: its output tells
    (finished,) = events(repo, "task_finished")
    assert finished.data["status"] == "stopped"
    assert "could not authenticate" in finished.data["reason"]
    (item,) = events(repo, "inbox_opened")
    assert "could not authenticate" in item.data["summary"]
    assert git(repo, "rev-list", "--count", f"main..{GOAL_BRANCH}").strip() == "0"


@pytest.mark.parametrize("name", CLIS)
def test_a_rate_limit_then_success_finishes_the_task(repo: Path, name: str) -> None:
    box = make_sandbox()
    env = cli_environment(name, box, CLAUDE_CODE_MAX_RETRIES="3")
    project(repo, name, box)
    limited = {
        "status": 429,
        "body": {"error": {"message": "rate limited", "type": "rate_limit_error"}},
        "headers": {"retry-after": "0"},
    }

    run = run_sealed(repo, box, env, "goal", "tests green", failures=[limited])

    assert run.done.returncode == 0, run.done.stdout + run.done.stderr
    assert_sealed(run, box)
    statuses = [p["status"] for p in run.posts()]
    assert 429 in statuses
    assert statuses[-1] == 200
    assert "return a + b" in git(repo, "show", f"{GOAL_BRANCH}:calc.py")
    (finished,) = events(repo, "task_finished")
    assert finished.data["status"] == "done"


def test_the_real_claude_rate_limited_pauses_its_loop_which_then_resumes_by_itself(
    repo: Path,
) -> None:
    """Issue 30 item 3: Claude Code's own 429 output (its retries off) pauses the loop's
    backend; loopctl's backoff (2 s here) passes and the next tick, run by itself, fixes calc."""
    box = make_sandbox()
    env = cli_environment("claude", box, CLAUDE_CODE_MAX_RETRIES="0")
    project(repo, "claude", box, config=PRICES + '\n[budget]\nrate_limit_backoff = "2s"\n')
    write_loop(repo, "night", 'every = "1s"\ngoal = "tests green"\nprompt = "Fix add()"\n')
    commit_all(repo, "a timed loop")
    limited = {
        "status": 429,
        "body": {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
    }

    run = run_sealed(
        repo, box, env, "run", "night", "--max-ticks", "2", failures=[limited] * CLAUDE_429S
    )

    assert_sealed(run, box)
    statuses = [p["status"] for p in run.posts()]
    assert statuses.count(429) == CLAUDE_429S
    assert statuses[-1] == 200
    first, second = finished_makers(repo)
    assert first["status"] == "error"
    assert "429" in first["text"]
    (paused,) = [e for e in events(repo, "note") if e.data.get("what") == "backend_paused"]
    assert (paused.data["backend"], paused.data["kind"]) == ("claude", "rate-limit")
    assert paused.data["stated"] is False  # Claude Code states no reset: loopctl's backoff
    assert "429" in paused.data["said"]
    (resumed,) = [e for e in events(repo, "note") if e.data.get("what") == "backend_resumed"]
    ended = events(repo, "task_finished")
    assert (ended[0].data["status"], ended[0].data["outcome"]) == ("paused", "rate-limited")
    assert ended[-1].data["status"] == "done"
    until = datetime.fromisoformat(paused.data["until"])
    (_, again) = [e for e in events(repo, "agent_started") if e.data["role"] == "maker"]
    assert again.time >= until
    assert resumed.seq < again.seq
    assert second["status"] == "ok"
    (made,) = [e for e in events(repo, "worktree_created") if e.run == ended[-1].run]
    assert "return a + b" in git(repo, "show", f"{made.data['branch']}:calc.py")


@pytest.mark.parametrize("name", CLIS)
def test_a_hung_model_is_ended_by_loopctls_timeout_with_the_whole_process_group(
    tmp_path: Path, name: str
) -> None:
    # The timeout must outlast the CLI's start to hit the hang: opencode and aider take seconds,
    # and a busy machine takes longer still. A run whose CLI never reached the server before
    # the timeout proves nothing, so it is run again, in a fresh repository, with a timeout
    # three times as long: the test waits on the request arriving, not on a guessed start time.
    timeout_s = 6 if name in ("claude", "codex") else 20
    for attempt in range(3):
        repo = make_repo(tmp_path / f"repo-{attempt}")
        box = make_sandbox()
        env = cli_environment(name, box)
        project(repo, name, box, config=PRICES + ONE_ATTEMPT, timeout=f"{timeout_s}s")
        run = run_sealed(repo, box, env, "goal", "tests green", script="hang")
        if run.posts() or attempt == 2:
            break
        timeout_s *= 3

    assert run.done.returncode == 1, run.done.stdout + run.done.stderr
    assert_sealed(run, box)
    assert {p["status"] for p in run.posts()} == {0}  # asked, never answered
    (maker,) = finished_makers(repo)
    assert maker["status"] == "timeout"
    (started,) = [e for e in events(repo, "agent_started") if e.data["role"] == "maker"]
    assert process_group(started.data["pid"]) == []  # the CLI and everything it started


@pytest.mark.parametrize("name", CLIS)
def test_a_cli_that_claims_success_without_a_fix_does_not_pass(repo: Path, name: str) -> None:
    box = make_sandbox()
    env = cli_environment(name, box)
    project(repo, name, box, config=PRICES + ONE_ATTEMPT)

    run = run_sealed(repo, box, env, "goal", "tests green", script="never_fix")

    assert run.done.returncode == 1
    assert_sealed(run, box)
    (maker,) = finished_makers(repo)
    assert maker["exit_code"] == 0  # the CLI says all is well …
    assert "Fixed add()." in maker["text"]
    (check,) = events(repo, "check_finished")
    assert check.data["passed"] is False  # … the check says otherwise
    assert git(repo, "rev-list", "--count", f"main..{GOAL_BRANCH}").strip() == "0"


# --- Claude Code's permissions -------------------------------------------------------------------


def test_a_permission_denial_reported_with_exit_0_is_not_a_success(repo: Path) -> None:
    box = make_sandbox()
    env = cli_environment("claude", box)
    project(repo, "claude", box, config=PRICES + ONE_ATTEMPT)

    # The model edits through `Bash python3 -c …`, which acceptEdits denies.
    run = run_sealed(repo, box, env, "goal", "tests green", script="denied")

    assert run.done.returncode == 1
    assert_sealed(run, box)
    (maker,) = finished_makers(repo)
    assert (maker["exit_code"], maker["status"]) == (0, "ok")
    assert maker["permission_denials"] == 1
    assert maker["denied_tools"] == ["Bash"]
    (finished,) = events(repo, "task_finished")
    assert finished.data["status"] != "done"
    assert "add(2, 3) is not 5" in finished.data["reason"]
    worktree_calc = Path(events(repo, "worktree_created")[0].data["path"]) / "calc.py"
    assert "return a - b" in worktree_calc.read_text()


def test_bypass_permissions_as_root_is_refused_up_front_unless_a_sandbox(repo: Path) -> None:
    box = make_sandbox()
    env = cli_environment("claude", box)
    env.pop("IS_SANDBOX", None)  # some machines set it; Claude Code honours only "1"
    project(repo, "claude", box, extra='permission_mode = "bypassPermissions"\n')

    refused = run_sealed(repo, box, env, "goal", "tests green")
    if os.geteuid() != 0:
        # Not root: Claude Code accepts the mode and the run works.
        assert refused.done.returncode == 0, refused.done.stderr
        return
    assert refused.done.returncode == 1
    assert "refuses bypassPermissions when run as root" in refused.done.stderr
    assert "Traceback" not in refused.done.stderr
    assert events(repo, "worktree_created") == []
    assert refused.posts() == []

    # IS_SANDBOX=1 is Claude Code's own switch for a disposable root sandbox.
    allowed = run_sealed(repo, box, {**env, "IS_SANDBOX": "1"}, "goal", "tests green")
    assert allowed.done.returncode == 0, allowed.done.stdout + allowed.done.stderr
    assert "return a + b" in git(repo, "show", f"{GOAL_BRANCH}:calc.py")


# --- Codex specifics ---------------------------------------------------------------------------


def test_codex_with_an_unknown_model_slug_still_succeeds_through_its_shell_tool(
    repo: Path,
) -> None:
    box = make_sandbox()
    env = cli_environment("codex", box)
    # "fake-model": codex warns with an item of type "error" and offers exec_command only.
    project(repo, "codex", box, config='\n[prices."fake-model"]\ninput = 3.0\noutput = 15.0\n')
    agent = repo / "agents" / "real-codex.toml"
    agent.write_text(agent.read_text().replace('"gpt-5.5"', '"fake-model"'))
    commit_all(repo, "unknown slug")

    run = run_sealed(repo, box, env, "goal", "tests green")

    assert run.done.returncode == 0, run.done.stdout + run.done.stderr
    out = next((repo / ".loop" / "runs").rglob("maker.out")).read_text()
    warnings = [
        json.loads(line)
        for line in out.splitlines()
        if line.startswith("{") and '"type":"error"' in line
    ]
    assert warnings, "codex no longer warns about unknown model metadata"
    (maker,) = finished_makers(repo)
    assert maker["status"] == "ok"
    assert "return a + b" in git(repo, "show", f"{GOAL_BRANCH}:calc.py")
    # A custom provider speaks plain HTTP: no websocket upgrade was tried.
    assert all(p["method"] == "POST" for p in run.requests)
    assert {p["path"] for p in run.requests} == {"/v1/responses"}


def process_group(pgid: int) -> list[int]:
    """Living processes in process group `pgid` (zombies count as gone)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


# --- the versions we claim ----------------------------------------------------------------------


@pytest.mark.parametrize("name", CLIS)
def test_the_cli_tested_is_the_pinned_version_the_readme_names(name: str) -> None:
    binary = require_cli(name)
    script = (ROOT / "scripts" / "install-agent-clis").read_text()
    readme = (ROOT / "docs" / "reference.md").read_text()  # where README.md's list moved
    version = VERSIONS[name]
    assert re.search(rf"[@=]{re.escape(version)}\"", script), f"{name} {version} is not pinned"
    assert version in readme

    done = subprocess.run(
        [str(binary), "--version"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        env={**os.environ, "PATH": f"{binary.parent}{os.pathsep}{os.environ['PATH']}"},
    )

    assert done.returncode == 0, done.stderr
    assert version in done.stdout


# --- MCP connectors through the real CLIs ------------------------------------------------------

MCP_SERVER = Path(__file__).parents[1] / "programs" / "mcp_server.py"
MCP_SECRET = "ref-passphrase-real-cli-51c0"


def connector_project(
    repo: Path, tmp_path: Path, name: str, slow_start: float = 0
) -> tuple[Sandbox, dict[str, str]]:
    box = make_sandbox()
    env = cli_environment(
        name,
        box,
        REF_PASSPHRASE=MCP_SECRET,
        MCP_RECORD=str(tmp_path / "mcp-calls.jsonl"),
        MCP_STARTED=str(tmp_path / "mcp-started.jsonl"),
        MCP_SLOW_START=str(slow_start),
    )
    connector = (
        f'\n[connectors.ref]\ncommand = ["{sys.executable}", "{MCP_SERVER}"]\n'
        'env_allow = ["REF_PASSPHRASE", "MCP_RECORD", "MCP_STARTED", "MCP_SLOW_START"]\n'
    )
    # The test's MCP server records its calls beside the test: a place the agent file grants,
    # since the CLI starts the server inside loopctl's sandbox.
    grant = f"\n[sandbox]\nwrite = [{json.dumps(str(tmp_path))}]\n"
    project(repo, name, box, config=PRICES + connector, extra='connectors = ["ref"]\n' + grant)
    return box, env


def assert_secret_kept(repo: Path, run: SealedRun, tmp_path: Path) -> None:
    """The connector got its secret; the model and loopctl's files never saw it."""
    (started,) = [json.loads(line) for line in (tmp_path / "mcp-started.jsonl").open()]
    assert started["secret_sha"] == hashlib.sha256(MCP_SECRET.encode()).hexdigest()[:12]
    assert all(MCP_SECRET not in json.dumps(p) for p in run.requests)
    for path, content in all_text_under(repo / ".loop"):
        assert MCP_SECRET not in content, path
    assert "return a + b" in git(repo, "show", f"{GOAL_BRANCH}:calc.py")


def test_real_claude_calls_a_declared_mcp_connector_without_seeing_its_secret(
    repo: Path, tmp_path: Path
) -> None:
    # A server slow to start (as a sandboxed one is on a busy machine): headless Claude would
    # send its first request without the server's tools unless loopctl asks it to wait, and
    # asked, it waits 5 s (MCP_CONNECT_TIMEOUT_MS) unless told longer: this one takes 7.
    box, env = connector_project(repo, tmp_path, "claude", slow_start=7)

    run = run_sealed(repo, box, env, "goal", "tests green", script="lookup_then_fix")

    assert run.done.returncode == 0, run.done.stdout + run.done.stderr
    offered = {tool for request in run.model_requests() for tool in request.tools}
    assert {"mcp__ref__lookup", "mcp__ref__delete"} <= offered
    (call,) = [json.loads(line) for line in (tmp_path / "mcp-calls.jsonl").open()]
    assert (call["tool"], call["arguments"]) == ("lookup", {"key": "alpha"})
    answers = [answer for request in run.model_requests() for answer in request.tool_results]
    assert any("alpha: first letter" in answer for answer in answers)
    (maker,) = finished_makers(repo)
    assert "permission_denials" not in maker  # the preset allowed the declared server's tools
    assert_secret_kept(repo, run, tmp_path)


def test_real_codex_starts_a_declared_mcp_connector_behind_its_tool_search(
    repo: Path, tmp_path: Path
) -> None:
    box, env = connector_project(repo, tmp_path, "codex")

    # Codex starts MCP servers beside its first model call: answer once the server is up.
    started = tmp_path / "mcp-started.jsonl"
    run = run_sealed(repo, box, env, "goal", "tests green", wait_for_file=started)

    assert run.done.returncode == 0, run.done.stdout + run.done.stderr
    # Codex 0.171 starts the server at once but offers MCP tools to the model only through its
    # deferred `tool_search`, not by name.
    tool_types = {
        tool.get("type") for request in run.model_requests() for tool in request.body["tools"]
    }
    assert "tool_search" in tool_types
    assert_secret_kept(repo, run, tmp_path)


# --- the loop's rules on the wire (issue 31, item 2) ----------------------------------------------

STREAM = 'args = ["--output-format", "stream-json", "--verbose"]\nresume = true\n'


def test_every_request_of_the_real_claude_carries_the_rules_hash_and_its_hook_prints_them(
    repo: Path,
) -> None:
    """Every model request of two attempts carries the current rules' marker; the second
    attempt resumes the first's session, so Claude Code runs loopctl's SessionStart hook
    (`compact|resume`) inside the sandbox, and its stream shows the block it printed.

    A real compaction is not forced here: Claude Code 2.1.197 starts one when the server reports
    a context past CLAUDE_CODE_AUTO_COMPACT_WINDOW, but gives it up on a short session
    (`compact_result: failed`, "too_few_groups"; `/compact` says "Not enough messages to
    compact"). The fake claude plays one as 2.1.197 streams it (test_rules_hook.py)."""
    box = make_sandbox()
    env = cli_environment("claude", box)
    project(repo, "claude", box, extra=STREAM)

    run = run_sealed(repo, box, env, "goal", "tests green", script="fix_on_second_attempt")

    assert run.done.returncode == 0, run.done.stdout + run.done.stderr
    assert_sealed(run, box)
    notes = [e.data for e in events(repo, "note", TASK) if e.data.get("what") == "rules"]
    assert [n["attempt"] for n in notes] == [1, 2]
    (sha,) = {n["sha256"] for n in notes}
    marker = f"loopctl-rules v1 sha256:{sha}"
    turns = [r for r in run.model_requests() if r.tools]  # those that can lead to a tool call
    assert len(turns) >= 4
    assert all(marker in r.text for r in turns)
    second = next((repo / ".loop" / "runs").rglob("attempt-2/maker.out")).read_text()
    hooks = [
        json.loads(line)
        for line in second.splitlines()
        if line.startswith("{") and '"hook_response"' in line
    ]
    resumed = [h for h in hooks if h.get("hook_name") == "SessionStart:resume"]
    assert resumed, second[:2000]
    assert all(marker in h["output"] and h["exit_code"] == 0 for h in resumed)
    assert [e for e in events(repo, "note") if e.data.get("what") == "rules_not_reinjected"] == []


def test_after_each_real_compaction_claude_is_given_the_rules_again(repo: Path) -> None:
    """The server reports a context past Claude Code's compaction window until the CLI has
    compacted twice: after each compaction loopctl's SessionStart hook prints the rules block
    (the stream shows it), the requests that follow carry its hash, and the turn is recorded
    as reinjected, with no warning."""
    box = make_sandbox()
    env = cli_environment("claude", box, CLAUDE_CODE_AUTO_COMPACT_WINDOW=str(COMPACT_WINDOW))
    project(repo, "claude", box, extra=STREAM)

    run = run_sealed(repo, box, env, "goal", "tests green", script="compact_twice_then_fix")

    assert run.done.returncode == 0, run.done.stdout + run.done.stderr
    assert_sealed(run, box)
    assert "return a + b" in git(repo, "show", f"{GOAL_BRANCH}:calc.py")
    attempts = [(e.data["verdict"], e.data["reason"]) for e in events(repo, "attempt_finished")]
    assert len(attempts) == 1, attempts
    (note,) = [e.data for e in events(repo, "note", TASK) if e.data.get("what") == "rules"]
    marker = f"loopctl-rules v1 sha256:{note['sha256']}"
    out = next((repo / ".loop" / "runs").rglob("attempt-1/maker.out")).read_text()
    stream = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    boundaries = [e for e in stream if e.get("subtype") == "compact_boundary"]
    hooks = [e for e in stream if e.get("hook_name") == "SessionStart:compact"]
    assert len(boundaries) >= 2
    assert all(marker in h["output"] for h in hooks if h.get("subtype") == "hook_response")
    (finished,) = finished_makers(repo)
    assert finished["compactions"] == len(boundaries)
    assert finished["rules_reinjected"] == len(boundaries)
    assert [e for e in events(repo, "note") if e.data.get("what") == "rules_not_reinjected"] == []
    # On the wire: every request carries the hash; after a compaction the task's prompt is
    # summarised away, and the rules are there through the hook's output.
    requests = run.model_requests()
    assert all(marker in r.text for r in requests)
    compacted = [r for r in requests if f"# Task {TASK} (attempt 1)" not in r.text]
    assert len(compacted) >= 2
    assert all("SessionStart:compact" in r.text for r in compacted)
