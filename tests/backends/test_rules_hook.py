"""Issue 31, item 2: Claude Code is given the loop's rules again after it compacts its context,
through a SessionStart hook in settings of the turn's own, and the stream shows whether they
came back.

The hook is run here as Claude Code runs it (its command through `sh -c`); the fake claude
plays a compaction the way Claude Code 2.1.197 streams one (`compact_boundary`, then the
`SessionStart:compact` hook's response); tests/backends/test_real_clis.py drives the real CLI.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.backends import (
    fake_calls,
    install_fake_clis,
    make_agent,
    make_request,
    set_scenario,
)
from support.cli import invoke
from support.journal import events
from support.repos import FAST_CHECK, GOAL_BRANCH, git, make_project, toml_value, write_config

from loopctl.backends import rules_hook
from loopctl.backends.claude import ClaudeBackend
from loopctl.definitions.agents import Backend
from loopctl.engine.rules import rules_block

TASK = "tests-green"
BLOCK = rules_block(
    instructions="Keep it small.",
    rules=["Never edit tests."],
    protected=["tests/**"],
    scope=["calc.py"],
)


def run_hook(settings_file: Path) -> subprocess.CompletedProcess[str]:
    """The SessionStart hook for a compaction, run as Claude Code runs a command hook."""
    settings = json.loads(settings_file.read_text())
    (group,) = settings["hooks"]["SessionStart"]
    assert set(group["matcher"].split("|")) == {"compact", "resume"}
    (hook,) = group["hooks"]
    assert hook["type"] == "command"
    return subprocess.run(["sh", "-c", hook["command"]], capture_output=True, text=True)


def test_a_maker_turn_carries_settings_whose_hook_prints_the_rules_block(
    tmp_path: Path,
) -> None:
    # A folder name a shell would act on: the hook's command quotes the path it names.
    runs = tmp_path / "it's $(touch pwned) `x`"
    request = make_request(
        make_agent(Backend.CLAUDE, tmp_path),
        tmp_path,
        runs=runs,
        rules=BLOCK.text,
        rules_marker=BLOCK.marker,
    )

    argv = ClaudeBackend().invocation(request).argv

    settings_file = Path(argv[argv.index("--settings") + 1])
    assert settings_file.parent == request.stdout_path.parent  # beside the logs, not in the tree
    done = run_hook(settings_file)
    assert done.returncode == 0, done.stderr
    assert done.stdout == BLOCK.text
    assert BLOCK.marker in done.stdout
    assert not (tmp_path / "pwned").exists()
    assert not list(Path.cwd().glob("pwned"))


def test_a_turn_without_rules_gets_no_hook(tmp_path: Path) -> None:
    request = make_request(make_agent(Backend.CLAUDE, tmp_path), tmp_path, role="checker")
    assert "--settings" not in ClaudeBackend().invocation(request).argv


def stream(*events: dict[str, object]) -> str:
    return "\n".join(json.dumps(e) for e in events) + "\n"


BOUNDARY = {"type": "system", "subtype": "compact_boundary", "compact_metadata": {}}


def response(output: str, name: str = "SessionStart:compact") -> dict[str, object]:
    return {
        "type": "system",
        "subtype": "hook_response",
        "hook_name": name,
        "hook_event": "SessionStart",
        "output": output,
    }


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        ([], (0, 0, 0)),
        ([BOUNDARY, response(BLOCK.text)], (1, 1, 0)),
        ([response(BLOCK.text), BOUNDARY], (1, 1, 0)),  # either side of its boundary
        ([BOUNDARY], (1, 0, 1)),
        ([BOUNDARY, response("other rules")], (1, 0, 1)),
        ([BOUNDARY, response(BLOCK.text, "SessionStart:resume")], (1, 0, 1)),
        ([BOUNDARY, response(BLOCK.text), BOUNDARY], (2, 1, 1)),
    ],
)
def test_arrival_counts_compactions_the_rules_did_not_follow(
    events: list[dict[str, object]], expected: tuple[int, int, int]
) -> None:
    seen = rules_hook.arrival(stream(*events), BLOCK.marker)
    assert (seen.compactions, seen.reinjected, seen.missed) == expected
    assert bool(seen.warning()) == bool(expected[2])


# --- end to end, with the fake claude ------------------------------------------------------------


def claude_project(repo: Path) -> None:
    make_project(repo)
    (repo / "agents" / "claude-maker.toml").write_text(
        'description = "claude"\nbackend = "claude"\nenv.allow = ["ANTHROPIC_API_KEY"]\n'
        'developer_instructions = "Never edit tests."\n'
        'args = ["--output-format", "stream-json", "--verbose"]\n'
        '[sandbox]\nwrite = ["~/.fake-cli"]\n'
    )
    write_config(
        repo,
        'version = 1\n\n[defaults]\nmaker = "claude-maker"\n\n'
        f'[conditions]\n"tests green" = {toml_value(FAST_CHECK)}\n',
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "claude maker")


def rules_notes(repo: Path, what: str) -> list[dict[str, object]]:
    return [dict(e.data) for e in events(repo, "note", TASK) if e.data.get("what") == what]


def test_after_a_compaction_the_rules_come_back_and_the_hash_is_on_record(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_fake_clis(tmp_path / "bin", monkeypatch)
    claude_project(repo)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-rules")
    set_scenario("claude", mode="fix", compactions=2)

    result = invoke(monkeypatch, repo, "goal", "tests green")

    assert result.exit_code == 0, result.output
    assert "return a + b" in git(repo, "show", f"{GOAL_BRANCH}:calc.py")
    (noted,) = rules_notes(repo, "rules")
    sha = noted["sha256"]
    marker = f"loopctl-rules v1 sha256:{sha}"
    prompt = next((repo / ".loop" / "runs").rglob("maker-prompt.md")).read_text()
    assert marker in prompt
    assert "Never edit tests." in prompt
    argv = fake_calls("claude")[-1]["argv"]
    assert argv[argv.index("-p") + 1] == prompt
    (finished,) = events(repo, "agent_finished", TASK)
    assert finished.data["compactions"] == 2
    assert finished.data["rules_reinjected"] == 2
    assert rules_notes(repo, "rules_not_reinjected") == []
    out = next((repo / ".loop" / "runs").rglob("maker.out")).read_text()
    assert out.count(marker) >= 2  # each hook response printed the block


def test_a_compaction_the_rules_did_not_follow_is_recorded_as_a_warning(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_fake_clis(tmp_path / "bin", monkeypatch)
    claude_project(repo)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-rules")
    set_scenario("claude", mode="fix", compactions=1, hooks=False)

    result = invoke(monkeypatch, repo, "goal", "tests green")

    assert result.exit_code == 0, result.output  # a warning, not a failure
    (warned,) = rules_notes(repo, "rules_not_reinjected")
    assert "1 of 1 compaction(s)" in str(warned["warning"])
    (noted,) = rules_notes(repo, "rules")
    assert warned["sha256"] == noted["sha256"]
