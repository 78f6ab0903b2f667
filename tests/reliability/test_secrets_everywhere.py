"""Scenario 6: canary values in 10 secret-looking variables reach no agent, prompt, log or state.

The agent is hostile: it finds the values in a file copied into its worktree and prints them
raw, base64- and URL-encoded; the task command quotes one in the task's text. None of those
forms may appear in anything loopctl writes.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest
from support.repos import git

from loopctl.cli.reporting import write_crash_log

PY = sys.executable
AGENT = Path(__file__).parent / "agents" / "leaky.py"
NAMES = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GITHUB_TOKEN",
    "AWS_SECRET_ACCESS_KEY",
    "DB_PASSWORD",
    "SLACK_WEBHOOK_SECRET",
    "NPM_AUTH_TOKEN",
    "GCP_CREDENTIALS",
    "MY_SERVICE_KEY",
    "LOOPCTL_CANARY_TOKEN",
)


def canaries() -> dict[str, str]:
    return {name: f"canary-{index}-{name.lower()}-7f3a9c" for index, name in enumerate(NAMES)}


def forms(value: str) -> list[str]:
    """The value and the encodings a leak might use (the middle of a base64 run counts)."""
    b64 = base64.b64encode(f"user:{value}".encode()).decode()
    return [value, urllib.parse.quote(value, safe=""), b64[8:-4]]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / ".gitignore").write_text("secrets.txt\n__pycache__/\n")
    (repo / "secrets.txt").write_text("\n".join(canaries().values()))
    (repo / "agents").mkdir()
    env_file = tmp_path / "agent-env.json"
    (repo / "agents" / "leaky.toml").write_text(
        f'backend = "command"\nargv = {json.dumps([PY, str(AGENT), str(env_file)])}\n'
        f"\n[sandbox]\nwrite = [{json.dumps(str(tmp_path))}]\n"
    )
    leak_in_task = canaries()["GITHUB_TOKEN"]
    items = json.dumps([{"id": "t1", "title": f"token is {leak_in_task}"}])
    check = "import calc, sys; sys.exit(0 if calc.add(2, 3) == 5 else 1)"
    (repo / ".loop" / "loops").mkdir(parents=True)
    (repo / ".loop" / "config.toml").write_text('[defaults]\nmaker = "leaky"\n')
    (repo / ".loop" / "loops" / "leak.toml").write_text(
        "[tasks]\n"
        f"command = {json.dumps([PY, '-c', f'print({items!r})'])}\n"
        'id = "{id}"\nprompt = "Fix add(). Context: {title}"\n\n'
        f"[checker]\ncommand = {json.dumps([PY, '-B', '-c', check])}\n\n"
        '[worktree]\ncopy = ["secrets.txt"]\nkeep = "always"\n'
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "leaky project")
    return repo


def test_no_canary_reaches_agent_env_log_state_prompt_or_commit(
    project: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    env = {**os.environ, **canaries(), "LOOPCTL_HOME": str(home)}
    done = subprocess.run(
        [PY, "-m", "loopctl", "run", "leak", "--once"],
        cwd=project, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr

    agent_env = json.loads((tmp_path / "agent-env.json").read_text())
    reached_agent = sorted(set(NAMES) & set(agent_env))
    written: dict[str, str] = {}
    # What loopctl wrote: the log, projections, per-attempt captures, crash logs. (The user's own
    # definitions and the worktree, where the user asked for secrets.txt to be copied, are not.)
    own = [
        *(project / ".loop").rglob("*"),
        *(p for p in home.rglob("*") if "worktrees" not in p.parts),
    ]
    for path in own:
        if path.is_file() and path.parent.name != "loops" and path.name != "config.toml":
            written[str(path)] = path.read_text(encoding="utf-8", errors="replace")
    written["git log"] = git(project, "log", "--all", "--format=%B")
    written["stdout"] = done.stdout + done.stderr
    leaks = [
        (where, form[:20])
        for where, text in written.items()
        for value in canaries().values()
        for form in forms(value)
        if form in text
    ]
    print(
        f"\ncanaries: {len(NAMES)} variables x {len(forms('x'))} forms;"
        f" reached the agent: {len(reached_agent)}; found in {len(written)} files: {len(leaks)}"
    )
    assert reached_agent == []
    assert leaks == []
    assert "[REDACTED]" in "".join(written.values())  # the agent did print them


def test_crash_logs_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in canaries().items():
        monkeypatch.setenv(name, value)
    secret = canaries()["ANTHROPIC_API_KEY"]
    try:
        raise RuntimeError(f"request failed with key {secret}")
    except RuntimeError as exc:
        log = write_crash_log(exc)
    assert log is not None
    text = log.read_text()
    assert secret not in text
    assert "[REDACTED]" in text
