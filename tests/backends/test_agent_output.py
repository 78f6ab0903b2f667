"""Why an agent failed, where a person looks: the progress line, inbox show, replay, STATE.md.

A real failing agent (tests/agents/fails_loudly.py) prints a secret's value and a screen-clearing
escape before its reason; every view shows the reason and the attempt folder, neither of the others.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from support.cli import assert_clean_exit, run_loopctl
from support.journal import events
from support.repos import make_project

from loopctl.backends.base import AgentRequest
from loopctl.backends.output_tail import agent_output_tail, last_line
from loopctl.definitions.agents import Agent, Backend
from loopctl.secrets import Redactor

TASK = "tests-green"
SECRET = "sk-canary-0123456789abcdef"
REASON = "Error: Not logged in · Please run /login"


def _env() -> dict[str, str]:
    return {**os.environ, "ANTHROPIC_API_KEY": SECRET}


def _no_leak(text: str) -> None:
    assert SECRET not in text
    assert "\x1b" not in text


def test_a_failed_turn_says_why_and_where_in_every_view(repo: Path) -> None:
    make_project(repo, "fails_loudly.py", SECRET)

    goal = run_loopctl(repo, "goal", "tests green", "--max-iterations", "1", env=_env())

    assert_clean_exit(goal, 1)
    (finished,) = events(repo, "agent_finished", TASK)
    run = finished.run
    folder = f".loop/runs/{run}/{TASK}/attempt-1/"
    tail = finished.data["output_tail"]
    assert tail.splitlines()[-1] == REASON
    assert "step 39: thinking" in tail  # stdout's end too, not only stderr
    assert "step 0: thinking" not in tail  # a tail, not the whole output
    _no_leak(tail)
    # The progress line (plain, since stderr is a pipe) shows the reason and the folder.
    assert REASON in goal.stderr
    assert f"output: {folder}" in goal.stderr
    _no_leak(goal.stderr + goal.stdout)
    assert (repo / folder / "maker.err").is_file()  # the folder it names is the real one

    replay = run_loopctl(repo, "replay", str(run))
    assert_clean_exit(replay, 0)
    assert REASON in replay.stdout
    assert folder in replay.stdout
    _no_leak(replay.stdout)
    as_json = json.loads(run_loopctl(repo, "replay", str(run), "--json").stdout)
    (attempt,) = as_json["replay"]["tasks"][TASK]["attempts"]
    assert attempt["agent_status"] == "error"
    assert attempt["agent_output"].endswith(REASON)

    state = (repo / ".loop" / "STATE.md").read_text()
    assert "Not logged in" in state
    assert f"`{folder}`" in state
    _no_leak(state)

    (item,) = [e.data["id"] for e in events(repo, "inbox_opened")]
    shown = run_loopctl(repo, "inbox", "show", item, "--no-pager")
    assert_clean_exit(shown, 0)
    assert "Agent output (error), last lines:" in shown.stdout
    assert REASON in shown.stdout
    assert f"Attempt:     {folder}" in shown.stdout
    _no_leak(shown.stdout)
    detail = json.loads(run_loopctl(repo, "inbox", "show", item, "--json").stdout)
    detail = detail.get("item", detail)
    assert detail["attempt_dir"] == folder
    assert detail["agent_output"].endswith(REASON)


def _request(tmp_path: Path, backend: Backend, redactor: Redactor) -> AgentRequest:
    agent = Agent(name="a", path=tmp_path / "a.toml", backend=backend, argv=("x",))
    return AgentRequest(
        agent=agent,
        role="maker",
        prompt="p",
        worktree=tmp_path,
        prompt_file=tmp_path / "p.md",
        env={},
        stdout_path=tmp_path / "maker.out",
        stderr_path=tmp_path / "maker.err",
        redactor=redactor,
        loop="l",
        task="t",
        attempt=1,
    )


def test_the_tail_renders_json_events_and_gives_stderr_its_share(tmp_path: Path) -> None:
    lines = [
        '{"type":"thread.started","thread_id":"01a2"}',
        *(
            '{"type":"item.completed","item":{"id":"i","type":"agent_message","text":"m'
            + str(n)
            + '"}}'
            for n in range(20)
        ),
        '{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized: bad key"}}',
    ]
    (tmp_path / "maker.out").write_text("\n".join(lines) + "\n")
    warnings = "".join(f"warn {n}\n" for n in range(10))
    (tmp_path / "maker.err").write_text(warnings + "key hunter2x!\n")

    tail = agent_output_tail(_request(tmp_path, Backend.CODEX, Redactor(["hunter2x!"])), lines=6)

    assert tail.splitlines() == [
        "m18",
        "m19",
        "turn failed: unexpected status 401 Unauthorized: bad key",
        "warn 8",
        "warn 9",
        "key [REDACTED]",
    ]


def test_the_tail_of_a_huge_output_starts_at_a_whole_line_and_missing_files_are_empty(
    tmp_path: Path,
) -> None:
    event = '{"type":"item.completed","item":{"type":"agent_message","text":"%s"}}'
    (tmp_path / "maker.out").write_text("\n".join(event % ("x" * 1000) for _ in range(100)))
    request = _request(tmp_path, Backend.CODEX, Redactor([]))

    tail = agent_output_tail(request, lines=3)

    # Every line is a rendered message: no half JSON event from the cut.
    assert all(line.startswith("xxx") and "{" not in line for line in tail.splitlines())
    (tmp_path / "maker.out").unlink()
    assert agent_output_tail(request) == ""


def test_the_last_line_comes_from_the_stream_written_last(tmp_path: Path) -> None:
    out, err = tmp_path / "maker.out", tmp_path / "maker.err"
    out.write_text('{"type":"item.started","item":{"type":"command_execution","command":"make"}}\n')
    err.write_text("a warning\n\n")
    os.utime(out, ns=(1, 2_000_000_000))
    os.utime(err, ns=(1, 1_000_000_000))
    assert last_line(out, err, "codex") == "$ make"  # rendered as the live view shows it

    os.utime(err, ns=(1, 3_000_000_000))
    assert last_line(out, err, "codex") == "a warning"
    err.write_text("")
    assert last_line(out, err, "codex") == "$ make"  # an empty stream says nothing
    assert last_line(None, tmp_path / "missing", "codex") == ""
