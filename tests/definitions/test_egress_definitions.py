"""Issue 25 in the definitions: `[sandbox] network` and `hosts`, `[env.secrets]` and
`[checker] network`, read into the agent and the loop, their mistakes as `path:line` problems."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import invoke

from loopctl.definitions import load_project
from loopctl.egress import HostPort, NetworkMode

CONFIG = 'version = 1\n\n[defaults]\nmaker = "maker"\n'
LOOP = 'prompt = "Fix it."\n\n[maker]\nagent = "maker"\n'


def project(repo: Path, agent: str, loop: str = "") -> Path:
    (repo / ".loop" / "loops").mkdir(parents=True)
    (repo / ".loop" / "config.toml").write_text(CONFIG)
    (repo / ".loop" / "loops" / "fix.toml").write_text(LOOP + loop)
    (repo / "agents").mkdir()
    (repo / "agents" / "maker.toml").write_text('backend = "command"\nargv = ["true"]\n' + agent)
    return repo


def validate(monkeypatch: pytest.MonkeyPatch, repo: Path) -> tuple[int, str]:
    result = invoke(monkeypatch, repo, "validate")
    output = result.stdout + result.stderr
    assert "Traceback" not in output
    return result.exit_code, output


@pytest.mark.parametrize(
    ("line", "mode"),
    [
        ("", NetworkMode.PROXY),
        ('network = "proxy"', NetworkMode.PROXY),
        ('network = "none"', NetworkMode.NONE),
        ('network = "open"', NetworkMode.OPEN),
        ("network = true", NetworkMode.PROXY),  # the old switch keeps its meaning
        ("network = false", NetworkMode.NONE),
    ],
)
def test_agent_network_modes(repo: Path, line: str, mode: NetworkMode) -> None:
    project(repo, f"\n[sandbox]\n{line}\n")
    assert load_project(repo).agent("maker").sandbox.network is mode


def test_hosts_secrets_and_checker_network_are_read(repo: Path) -> None:
    project(
        repo,
        "\n[env]\nallow = ['GH_TOKEN']\n\n[env.secrets]\n"
        'MY_TOKEN = ["api.example.com", "uploads.example.com:8443"]\n'
        'RAW_KEY = "real"\n'
        '\n[sandbox]\nhosts = ["pypi.org", "http://127.0.0.1:5555/v1", "PyPI.org"]\n',
        '\n[checker]\ncommand = "true"\nnetwork = ["files.pythonhosted.org"]\n',
    )
    loaded = load_project(repo)
    agent = loaded.agent("maker")
    assert agent.sandbox.hosts == (HostPort("pypi.org", 443), HostPort("127.0.0.1", 5555))
    rules = {rule.name: rule for rule in agent.secret_hosts}
    assert rules["MY_TOKEN"].hosts == (
        HostPort("api.example.com", 443),
        HostPort("uploads.example.com", 8443),
    )
    assert rules["RAW_KEY"].real
    assert rules["RAW_KEY"].hosts == ()
    # Declaring a secret's hosts lends it: no need to list it in allow as well.
    assert agent.env_allow == ("GH_TOKEN", "MY_TOKEN", "RAW_KEY")
    checker = loaded.loops["fix"].checker
    assert checker.network is NetworkMode.PROXY
    assert checker.hosts == (HostPort("files.pythonhosted.org", 443),)


def test_checks_have_no_network_by_default(repo: Path) -> None:
    project(repo, "", '\n[checker]\ncommand = "true"\n')
    assert load_project(repo).loops["fix"].checker.network is NetworkMode.NONE


def test_the_configs_checker_network_is_every_loops_default(repo: Path) -> None:
    project(repo, "", '\n[checker]\ncommand = "true"\n')
    (repo / ".loop" / "config.toml").write_text(CONFIG + '\n[checker]\nnetwork = ["pypi.org"]\n')
    (repo / ".loop" / "loops" / "cut.toml").write_text(
        LOOP + '\n[checker]\ncommand = "true"\nnetwork = "none"\n'
    )
    loaded = load_project(repo)
    assert loaded.config.check_hosts == (HostPort("pypi.org", 443),)
    inherited = loaded.loops["fix"].checker
    assert (inherited.network, inherited.hosts) == (NetworkMode.PROXY, loaded.config.check_hosts)
    assert loaded.loops["cut"].checker.network is NetworkMode.NONE


@pytest.mark.parametrize(
    ("agent", "loop", "where", "message"),
    [
        (
            '\n[sandbox]\nnetwork = "sometimes"\n',
            "",
            "agents/maker.toml:5",
            "'network' in [sandbox] must be one of proxy, none, open, not 'sometimes'",
        ),
        (
            '\n[sandbox]\nhosts = ["api.example.com/v1"]\n',
            "",
            "agents/maker.toml:5",
            "[sandbox] hosts names 'api.example.com/v1'",
        ),
        (
            '\n[sandbox]\nhosts = ["example.com:99999"]\n',
            "",
            "agents/maker.toml:5",
            "has no valid port",
        ),
        (
            "\n[env.secrets]\nMY_TOKEN = 7\n",
            "",
            "agents/maker.toml:5",
            "'MY_TOKEN' in [env.secrets] must be a list of hosts",
        ),
        (
            '\n[env.secrets]\nMY_TOKEN = ["ftp://example.com"]\n',
            "",
            "agents/maker.toml:5",
            "[env.secrets] MY_TOKEN names 'ftp://example.com'",
        ),
        (
            "",
            '\n[checker]\ncommand = "true"\nnetwork = "proxy"\n',
            ".loop/loops/fix.toml:8",
            '\'network\' in [checker] must be "none", "open" or a list of hosts',
        ),
        (
            "",
            '\n[checker]\ncommand = "true"\nnetwork = ["a b"]\n',
            ".loop/loops/fix.toml:8",
            "[checker] network names 'a b'",
        ),
    ],
)
def test_mistakes_are_path_line_errors(
    repo: Path, monkeypatch: pytest.MonkeyPatch, agent: str, loop: str, where: str, message: str
) -> None:
    project(repo, agent, loop)
    code, output = validate(monkeypatch, repo)
    assert code == 2, output
    assert reported(output, f"{where}: ", message), output


@pytest.mark.parametrize(
    ("agent", "loop", "where", "message"),
    [
        (
            '\n[sandbox]\nnetwork = "open"\n',
            "",
            "agents/maker.toml:5",
            'the agent runs on the host\'s network, unfiltered (network = "open")',
        ),
        (
            '\n[env.secrets]\nRAW_KEY = "real"\n',
            "",
            "agents/maker.toml:5",
            'RAW_KEY is lent unchanged (RAW_KEY = "real")',
        ),
        (
            "",
            '\n[checker]\ncommand = "true"\nnetwork = "open"\n',
            ".loop/loops/fix.toml:8",
            "every check runs on the host's network, unfiltered",
        ),
    ],
)
def test_opt_outs_are_warned(
    repo: Path, monkeypatch: pytest.MonkeyPatch, agent: str, loop: str, where: str, message: str
) -> None:
    project(repo, agent, loop)
    code, output = validate(monkeypatch, repo)
    assert code == 0, output
    assert reported(output, f"{where}: warning: ", message), output


def reported(output: str, where: str, message: str) -> bool:
    """Whether one line of `validate` names the place and says the message."""
    return any(line.startswith(where) and message in line for line in output.splitlines())
