"""The replay gate of a proposal (issue 31, items 3 and 5), end to end: a run recorded with its
cassettes (a command maker asking the scripted model server through loopctl's real egress proxy,
in the real sandbox) proposes a change to its loop's definitions; approving it replays that run
offline under the proposed definitions, and refuses the proposal when the task recorded done
does not replay done."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import invoke
from support.journal import events
from support.model_server import Request, ScriptedModelServer, Turn
from support.repos import FAST_CHECK, PY, commit_all, git, make_project, toml_value, write_loop

FIXED = "def add(a, b):\n    return a + b\n"
PROMPT = "Fix add() in calc.py so that the tests pass."
LOOP = f'prompt = "{PROMPT}"\ngoal = "tests green"\n\n[budget]\nmax_iterations = 2\n'
CONDITION = f'"tests green" = {toml_value(FAST_CHECK)}'


def fix(request: Request, server: ScriptedModelServer) -> Turn:
    return Turn(text=FIXED)


def _proposal(diff: str) -> str:
    return f"Why: the loop reads better so.\n\n```diff\n{diff}```\n"


def _recorded_with_proposal(repo: Path, monkeypatch: pytest.MonkeyPatch, diff: str) -> str:
    """One recorded tick of `fix` whose maker proposes `diff`; the proposal's inbox item id."""
    with ScriptedModelServer(fix) as model:
        port = model.url.rsplit(":", 1)[1]
        make_project(
            repo,
            "asks_model_and_proposes.py",
            model.url,
            _proposal(diff),
            agent_extra=f'\n[sandbox]\nhosts = ["127.0.0.1:{port}"]\n',
        )
        write_loop(repo, "fix", LOOP)
        commit_all(repo, "the loop fix")
        result = invoke(monkeypatch, repo, "run", "fix", "--once")
        assert result.exit_code == 0, result.output
    (item,) = [e for e in events(repo, "inbox_opened") if e.data["kind"] == "proposal"]
    return str(item.data["id"])


def _approve(monkeypatch: pytest.MonkeyPatch, repo: Path, item: str) -> dict[str, object]:
    result = invoke(monkeypatch, repo, "inbox", "approve", item, "--json")
    answer: dict[str, object] = json.loads(result.output)["inbox_action"]
    assert result.exit_code == (0 if answer["ok"] else 1), result.output
    return answer


def test_a_proposal_the_recorded_run_still_passes_under_is_applied_by_the_replay_gate(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    diff = (
        "--- a/.loop/loops/fix.toml\n+++ b/.loop/loops/fix.toml\n"
        "@@ -4 +4 @@\n-max_iterations = 2\n+max_iterations = 3\n"
    )
    item = _recorded_with_proposal(repo, monkeypatch, diff)
    head = git(repo, "rev-parse", "HEAD").strip()

    answer = _approve(monkeypatch, repo, item)

    assert answer["ok"] is True, answer
    proposal = answer["proposal"]
    assert isinstance(proposal, dict)
    assert proposal["gate"] == "replay"
    assert proposal["checked"] == ["main"]
    assert git(repo, "rev-parse", "HEAD^").strip() == head
    assert "max_iterations = 3" in (repo / ".loop" / "loops" / "fix.toml").read_text()


def test_a_proposal_under_which_the_recorded_task_fails_is_refused_by_the_replay_gate(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing = (PY, "-c", "raise SystemExit(1)")
    diff = (
        "--- a/.loop/config.toml\n+++ b/.loop/config.toml\n"
        f'@@ -7 +7 @@\n-{CONDITION}\n+"tests green" = {toml_value(failing)}\n'
    )
    item = _recorded_with_proposal(repo, monkeypatch, diff)
    config = (repo / ".loop" / "config.toml").read_bytes()

    answer = _approve(monkeypatch, repo, item)

    assert answer["ok"] is False, answer
    proposal = answer["proposal"]
    assert isinstance(proposal, dict)
    assert (proposal["gate"], proposal["broken_task"]) == ("replay", "main")
    assert "breaks task 'main'" in str(answer["message"])
    assert (repo / ".loop" / "config.toml").read_bytes() == config
