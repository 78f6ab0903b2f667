"""`--dry-run` and `doctor` show each agent's network, allowed hosts, routes and lent secrets
(issue 25): names and hosts, never a value or a stand-in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import invoke
from support.repos import commit_all, make_project

TOKEN = "ghp_real-token-0123456789"
KEY = "sk-ant-real-key-0123456789"
AGENT_EXTRA = (
    '\n[env]\nallow = ["GH_TOKEN"]\n\n[env.secrets]\nMY_TOKEN = ["uploads.example.com:8443"]\n'
    '\n[sandbox]\nhosts = ["pypi.org"]\n'
)
CLAUDE = 'backend = "claude"\nenv.allow = ["ANTHROPIC_API_KEY"]\n'


@pytest.fixture
def project(repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    make_project(repo, "never_fixes.py", agent_extra=AGENT_EXTRA)
    (repo / "agents" / "writer.toml").write_text(CLAUDE)
    commit_all(repo, "a claude agent too")
    monkeypatch.setenv("GH_TOKEN", TOKEN)
    monkeypatch.setenv("MY_TOKEN", "mine-0123456789")
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    return repo


def no_secret_in(text: str) -> None:
    for value in (TOKEN, KEY, "mine-0123456789", "loopctl-stand-in-"):
        assert value not in text


def test_dry_run_shows_the_makers_network_and_secrets(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = invoke(monkeypatch, project, "goal", "tests green", "--dry-run")
    assert text.exit_code == 0, text.output
    out = text.stdout
    assert "  network:  proxy (its own network namespace" in out
    assert "  hosts:    pypi.org:443" in out
    assert (
        "secret:   GH_TOKEN (a stand-in inside; the real value only to api.github.com:443)" in out
    )
    assert (
        "secret:   MY_TOKEN (a stand-in inside; the real value only to uploads.example.com:8443)"
        in out
    )
    # The checks run the agent's code: no network by default.
    assert "Checks:" in out
    assert "  network:  none (its own network namespace, loopback only)" in out
    no_secret_in(out)

    payload = invoke(monkeypatch, project, "goal", "tests green", "--dry-run", "--json")
    preview = json.loads(payload.stdout)["dry_run"]
    (task,) = preview["tasks"]
    assert task["egress"]["network"] == "proxy"
    assert task["egress"]["hosts"] == ["pypi.org:443"]
    assert task["egress"]["secrets"] == {
        "GH_TOKEN": ["api.github.com:443"],
        "MY_TOKEN": ["uploads.example.com:8443"],
    }
    assert preview["check_egress"]["network"] == "none"
    no_secret_in(payload.stdout)


def test_doctor_shows_every_agent_and_every_loops_checks(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / ".loop" / "loops").mkdir(parents=True, exist_ok=True)
    (project / ".loop" / "loops" / "deps.toml").write_text(
        'prompt = "Update."\n\n[checker]\ncommand = "true"\nnetwork = ["pypi.org"]\n'
    )
    result = invoke(monkeypatch, project, "doctor")
    out = result.stdout
    assert "agents' network" in out, result.output
    assert "  maker (command):" in out
    assert "    hosts:    pypi.org:443" in out
    assert "  writer (claude):" in out
    assert "    route:    ANTHROPIC_BASE_URL -> https://api.anthropic.com" in out
    assert (
        "    secret:   ANTHROPIC_API_KEY (a stand-in inside; the real value only to"
        " api.anthropic.com:443)" in out
    )
    assert "  deps: proxy" in out
    assert "    hosts:    pypi.org:443" in out
    no_secret_in(out)

    as_json = invoke(monkeypatch, project, "doctor", "--json")
    report = json.loads(as_json.stdout)["doctor"]["egress"]
    assert report["agents"]["writer"]["routes"] == {
        "ANTHROPIC_BASE_URL": "https://api.anthropic.com"
    }
    assert report["checks"]["deps"]["hosts"] == ["pypi.org:443"]
    no_secret_in(as_json.stdout)
