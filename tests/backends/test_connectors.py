"""MCP connectors: `[connectors.NAME]` in config.toml, `connectors = [...]` in agent files.

A real stdio MCP server written with the SDK (tests/programs/mcp_server.py) is driven by a real
`loopctl goal`: through loopctl's own agent (backend openai, against the scripted model server),
and through the Claude Code and Codex presets (fake CLIs that record their argv), whose
launcher is then run exactly as the CLI would run it.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.backends import (
    fake_calls,
    fake_home,
    install_fake_clis,
    make_agent,
    make_request,
    reply_for,
)
from support.cli import invoke
from support.journal import events
from support.model_server import Reply, Request, ScriptedModelServer
from support.repos import FAST_CHECK, all_text_under, make_project, toml_value, write_config

from loopctl.backends import connectors
from loopctl.definitions.agents import Backend
from loopctl.definitions.connectors import Connector
from loopctl.definitions.project import load_project

SERVER = Path(__file__).parents[1] / "programs" / "mcp_server.py"
SECRET = "ref-passphrase-7f3c9a1e5b"  # a name no secret marker matches: redaction must be ours
SECRET_SHA = hashlib.sha256(SECRET.encode()).hexdigest()[:12]
TASK = "tests-green"
CONNECTOR = (
    f'\n[connectors.ref]\ncommand = ["{sys.executable}", "{SERVER}"]\n'
    'env_allow = ["REF_PASSPHRASE", "MCP_RECORD"]\n'
)


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the MCP server writes what reached it; the secret is in loopctl's environment."""
    path = tmp_path / "mcp-record.jsonl"
    monkeypatch.setenv("REF_PASSPHRASE", SECRET)
    monkeypatch.setenv("MCP_RECORD", str(path))
    return path


def calls_of(record: Path) -> list[dict[str, Any]]:
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text().splitlines() if line.strip()]


def connector_project(repo: Path, agent: str, config_extra: str = "") -> None:
    make_project(repo)
    # The fake CLIs record their calls in ~/.fake-cli, granted like any extra state folder.
    (repo / "agents" / "api.toml").write_text(agent + '\n[sandbox]\nwrite = ["~/.fake-cli"]\n')
    write_config(
        repo,
        'version = 1\n\n[defaults]\nmaker = "api"\n\n'
        f'[conditions]\n"tests green" = {toml_value(FAST_CHECK)}\n' + CONNECTOR + config_extra,
    )


def openai_agent(server: ScriptedModelServer, extra: str = "") -> str:
    return (
        f'backend = "openai"\nmodel = "gpt-test"\nbase_url = "{server.url}"\n'
        f'connectors = ["ref"]\n{extra}'
    )


# --- definitions ---------------------------------------------------------------------------------


def problems_of(repo: Path) -> list[str]:
    return [f"{p.path.name}:{p.line}: {p.message}" for p in load_project(repo).errors]


def test_connectors_load_and_an_agent_gets_the_ones_it_names(repo: Path) -> None:
    connector_project(repo, 'backend = "openai"\nmodel = "m"\nconnectors = ["ref"]\n')
    project = load_project(repo)
    assert project.errors == []
    (ref,) = project.agent("api").connectors
    assert ref == Connector(
        name="ref",
        command=(sys.executable, str(SERVER)),
        env_allow=("REF_PASSPHRASE", "MCP_RECORD"),
    )
    assert project.agent("maker").connectors == ()


def test_an_unknown_connector_is_a_path_line_error_with_a_suggestion(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    connector_project(repo, 'backend = "openai"\nmodel = "m"\n\nconnectors = ["rf"]\n')

    assert problems_of(repo)[0] == (
        "api.toml:4: unknown connector 'rf' (did you mean 'ref'?)"
        " ([connectors.NAME] in .loop/config.toml defines: ref)"
    )
    result = invoke(monkeypatch, repo, "validate")
    assert result.exit_code == 2
    assert "api.toml:4: unknown connector 'rf'" in result.output


@pytest.mark.parametrize(
    ("table", "line", "message"),
    [
        (
            '[connectors.gh]\ncommand = ["srv"]\nurl = "http://x"\n',
            1,
            "[connectors.gh] needs either 'command'",
        ),
        ("[connectors.gh]\nenv_allow = []\n", 1, "needs either 'command'"),
        ('[connectors.gh]\nurl = "ftp://x"\n', 2, "must be an http:// or https:// URL"),
        (
            '[connectors.gh]\nurl = "http://x"\nenv_allow = ["T"]\n',
            3,
            "an HTTP connector gets credentials as headers",
        ),
        (
            '[connectors.gh]\nurl = "http://x"\nheaders_env = {Authorization = "ghp_abc def"}\n',
            3,
            "must name the variable holding the value",
        ),
        ('[connectors.gh]\ncommand = ["srv"]\nenv_alow = ["T"]\n', 3, "did you mean 'env_allow'"),
        ('[connectors."a b"]\ncommand = ["srv"]\n', 1, "connector name 'a b' must be"),
    ],
)
def test_bad_connector_tables_are_path_line_errors(
    repo: Path, table: str, line: int, message: str
) -> None:
    make_project(repo, config_extra="\n" + table)
    offset = (repo / ".loop" / "config.toml").read_text().count("\n") - table.count("\n")
    (problem,) = problems_of(repo)
    assert problem.startswith(f"config.toml:{offset + line}: "), problem
    assert message in problem


def test_header_credentials_are_refused_for_a_cli_backend(repo: Path) -> None:
    connector_project(
        repo,
        'backend = "claude"\nconnectors = ["remote"]\n',
        '\n[connectors.remote]\nurl = "https://mcp.example"\n'
        'headers_env = {Authorization = "REMOTE_TOKEN"}\n',
    )
    problem = problems_of(repo)[0]
    assert problem.startswith("api.toml:2: connector 'remote' sends headers from headers_env")


# --- loopctl's own agent (backend openai) -----------------------------------------------------


def lookup_then_fix(request: Request, server: ScriptedModelServer) -> Reply:
    reply = reply_for(request)
    step = len(request.tool_results)
    env_probe = [sys.executable, "-c", "import os; print(sorted(os.environ))"]
    script = [
        ("ref__lookup", {"key": "alpha"}),
        ("run", {"argv": env_probe}),
        ("edit_file", {"path": "calc.py", "old": "return a - b", "new": "return a + b"}),
    ]
    if step < len(script):
        return reply(calls=[script[step]])
    return reply(text="Looked it up and fixed add().")


def test_the_openai_agent_calls_an_mcp_tool_and_the_secret_stays_with_the_server(
    repo: Path, monkeypatch: pytest.MonkeyPatch, model_server: ScriptedModelServer, record: Path
) -> None:
    model_server.script = lookup_then_fix
    connector_project(repo, openai_agent(model_server))

    result = invoke(monkeypatch, repo, "goal", "tests green")

    assert result.exit_code == 0, result.output
    # The model was offered the connector's tools, named NAME__tool, beside loopctl's own.
    first = model_server.posts()[0]
    offered = Request("chat", first.path, first.body, first.headers).tools
    assert {"ref__lookup", "ref__delete", "run"} <= set(offered)
    # The server ran the call, with the secret in its own environment, in the worktree.
    (call,) = calls_of(record)
    assert call["tool"] == "lookup"
    assert call["arguments"] == {"key": "alpha"}
    assert call["secret_sha"] == SECRET_SHA
    assert "REF_PASSPHRASE" in call["env_names"]
    assert Path(call["cwd"]).parent.parent != repo  # a worktree, not the main checkout
    # Its answer went back to the model; the agent's own `run` saw no connector variable.
    results = [
        Request("chat", s.path, s.body, s.headers).tool_results for s in model_server.posts()
    ]
    assert "alpha: first letter" in results[-1][0]
    assert "REF_PASSPHRASE" not in results[-1][1]
    assert "MCP_RECORD" not in results[-1][1]
    # Never the value: not in any request (prompt, tools), nor anywhere under .loop/.
    for seen in model_server.posts():
        assert SECRET.encode() not in seen.raw
    logs = dict(all_text_under(repo / ".loop"))
    for path, content in logs.items():
        assert SECRET not in content, path
    # The server's stderr log exists and was redacted (the server prints what it was given).
    (err,) = [content for path, content in logs.items() if path.name == "connector-ref.err"]
    assert "lookup-test starting with [REDACTED]" in err


def test_an_mcp_tool_matching_ask_waits_for_approval_then_runs_once(
    repo: Path, monkeypatch: pytest.MonkeyPatch, model_server: ScriptedModelServer, record: Path
) -> None:
    def script(request: Request, server: ScriptedModelServer) -> Reply:
        reply = reply_for(request)
        if not request.tool_results:
            return reply(text="Deleting.", calls=[("ref__delete", {"key": "omega"})])
        return reply(text="Deleted.")

    model_server.script = script
    connector_project(repo, openai_agent(model_server, 'ask = ["ref__del*"]\n'))

    def goal() -> None:
        invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")

    goal()
    (opened,) = [e.data for e in events(repo, "inbox_opened") if e.data["kind"] == "approval"]
    assert calls_of(record) == []  # asked, not called
    assert opened["evidence"]["action"] == "mcp_tool"
    assert opened["evidence"]["argv"] == ["mcp", "ref__delete", '{"key": "omega"}']
    assert "approve calling MCP tool `ref__delete" in opened["summary"]
    approve = invoke(monkeypatch, repo, "inbox", "approve", opened["id"])
    assert approve.exit_code == 0, approve.output

    goal()  # approved exactly as shown: it runs once
    assert [c["tool"] for c in calls_of(record)] == ["delete"]
    used = [e.data.get("approvals_used") for e in events(repo, "agent_finished", TASK)]
    assert used[-1] == [opened["id"]]


def test_a_connector_that_cannot_start_fails_the_turn_with_its_reason(
    repo: Path, monkeypatch: pytest.MonkeyPatch, model_server: ScriptedModelServer
) -> None:
    model_server.script = lookup_then_fix
    connector_project(
        repo,
        'backend = "openai"\nmodel = "gpt-test"\n'
        f'base_url = "{model_server.url}"\nconnectors = ["broken"]\n',
        '\n[connectors.broken]\ncommand = ["/nonexistent/mcp-server"]\n',
    )

    result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")

    assert result.exit_code == 1
    finished = events(repo, "agent_finished", TASK)[0].data
    assert finished["status"] == "error"
    assert finished["stop"] == "connector"
    assert "connector 'broken' failed to start" in finished["error"]
    assert model_server.posts() == []  # no model call is spent on a session without its tools


# --- the CLI presets ---------------------------------------------------------------------------


def cli_project(repo: Path, backend: str) -> None:
    connector_project(repo, f'backend = "{backend}"\nconnectors = ["ref"]\n')


def test_claude_gets_a_strict_mcp_config_that_names_a_launcher_not_the_secret(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, record: Path
) -> None:
    install_fake_clis(tmp_path / "bin", monkeypatch)
    cli_project(repo, "claude")

    result = invoke(monkeypatch, repo, "goal", "tests green")

    assert result.exit_code == 0, result.output
    (call,) = fake_calls("claude")
    argv = call["argv"]
    config_path = Path(argv[argv.index("--mcp-config") + 1])
    assert "--strict-mcp-config" in argv
    # A slow sandboxed server keeps its tools: Claude waits for it, and longer than 30 s.
    assert call["env"]["MCP_TIMEOUT"] == "120000"
    assert call["env"]["MCP_CONNECTION_NONBLOCKING"] == "0"
    assert call["env"]["MCP_CONNECT_TIMEOUT_MS"] == "120000"  # not Claude's 5 s
    assert config_path.is_relative_to(repo / ".loop" / "runs")  # not in the worktree
    assert not Path(call["cwd"]).resolve().is_relative_to(config_path.parent.resolve())
    (config,) = [json.loads(line) for line in (fake_home() / "claude.mcp.jsonl").open()]
    server = config["mcpServers"]["ref"]
    assert server["type"] == "stdio"
    assert server["command"] == sys.executable
    assert server["args"][:2] == ["-m", "loopctl.backends.connector_launch"]
    # The secret is in no argv, config or agent environment; the turn's files are gone.
    assert SECRET not in json.dumps(call)
    assert "REF_PASSPHRASE" not in call["env"]
    assert SECRET not in json.dumps(config)
    assert not Path(server["args"][2]).parent.exists()
    for path, content in all_text_under(repo / ".loop"):
        assert SECRET not in content, path


def test_codex_gets_mcp_servers_overrides_that_name_the_launcher(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, record: Path
) -> None:
    install_fake_clis(tmp_path / "bin", monkeypatch)
    cli_project(repo, "codex")

    result = invoke(monkeypatch, repo, "goal", "tests green")

    assert result.exit_code == 0, result.output
    (call,) = fake_calls("codex")
    argv = call["argv"]
    overrides = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-c"]
    assert f"mcp_servers.ref.command={json.dumps(sys.executable)}" in overrides
    (args,) = [o for o in overrides if o.startswith("mcp_servers.ref.args=")]
    launch = json.loads(args.split("=", 1)[1])
    assert launch[:2] == ["-m", "loopctl.backends.connector_launch"]
    # A sandboxed server on a busy machine gets longer than Codex's 10 s to start.
    assert "mcp_servers.ref.startup_timeout_sec=120" in overrides
    assert argv[-1] == "-"  # the prompt still comes last, on stdin
    assert SECRET not in json.dumps(call)
    assert "REF_PASSPHRASE" not in call["env"]
    assert not Path(launch[2]).exists()


def test_the_launcher_starts_the_server_with_its_secret_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, record: Path
) -> None:
    """What the CLI does with the config: start the launcher, speak MCP to the real server."""
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    ref = Connector(
        name="ref",
        command=(sys.executable, str(SERVER)),
        env_allow=("REF_PASSPHRASE", "MCP_RECORD"),
    )
    agent = make_agent(Backend.CLAUDE, tmp_path, connectors=(ref,))
    worktree = tmp_path / "wt"
    worktree.mkdir()
    request = make_request(agent, worktree)
    argv = connectors.claude_args(request)
    config = json.loads(Path(argv[1]).read_text())
    server = config["mcpServers"]["ref"]
    launch = Path(server["args"][2])
    assert launch.stat().st_mode & 0o777 == 0o600
    assert launch.parent.stat().st_mode & 0o777 == 0o700
    assert SECRET in launch.read_text()  # until the server starts, and only here

    async def lookup() -> str:
        params = StdioServerParameters(command=server["command"], args=server["args"], env={})
        with (tmp_path / "server.err").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
                result = await client.call_tool("lookup", {"key": "omega"})
                return str(result.content[0].text)  # type: ignore[union-attr]

    assert anyio.run(lookup) == f"omega: last letter (authenticated as sha {SECRET_SHA})"
    assert not launch.exists()  # read once, then gone
    again = subprocess.run(
        [server["command"], *server["args"]], capture_output=True, text=True, check=False
    )
    assert again.returncode == 1
    assert "was already used or removed" in again.stderr
    connectors.unstage(request)
    assert not launch.parent.exists()
