"""Set-up shared by the inbox, delivery and notification tests."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import PY, git, invoke, write_loop

PROGRAMS = Path(__file__).parent / "programs"
RECORD = PROGRAMS / "record_action.py"


def add_remote(repo: Path, tmp_path: Path) -> Path:
    """A bare repository as `origin`."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    return remote


def remote_refs(remote: Path) -> dict[str, str]:
    out = git(remote, "for-each-ref", "--format=%(refname) %(objectname)")
    return dict(line.split(" ", 1) for line in out.splitlines())


def ship_loop(repo: Path, deliver: str, name: str = "ship") -> None:
    write_loop(repo, name, f'goal = "tests green"\nprompt = "fix add"\n\n[deliver]\n{deliver}\n')


def action(ledger: Path, name: str, *flags: str) -> str:
    """A TOML inline table for a custom action that records itself in `ledger`."""
    argv = [PY, str(RECORD), str(ledger), name, *flags]
    return "{ name = " + json.dumps(name) + ", argv = " + json.dumps(argv) + " }"


def ledger_entries(ledger: Path) -> list[dict[str, Any]]:
    if not ledger.exists():
        return []
    return [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()]


def inbox_items(monkeypatch: pytest.MonkeyPatch, repo: Path, *flags: str) -> list[dict[str, Any]]:
    result = invoke(monkeypatch, repo, "inbox", "--json", *flags)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["version"] == 1
    found: list[dict[str, Any]] = payload["inbox"]
    return found


def the_approval(monkeypatch: pytest.MonkeyPatch, repo: Path) -> dict[str, Any]:
    (item,) = [i for i in inbox_items(monkeypatch, repo) if i["kind"] == "approval"]
    return item


def fake_gh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail: str | None = None) -> Path:
    """Put a fake `gh` first on PATH; returns the file its calls are logged to."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    gh = folder / "gh"
    gh.write_text(
        f"#!{PY}\nimport runpy\nrunpy.run_path({str(PROGRAMS / 'fake_gh.py')!r},"
        " run_name='__main__')\n"
    )
    gh.chmod(gh.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    log = tmp_path / "gh-calls.jsonl"
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("GH_FAKE_LOG", str(log))
    monkeypatch.setenv("GH_FAKE_STATE", str(tmp_path / "gh-state.json"))
    if fail:
        monkeypatch.setenv("GH_FAKE_FAIL", fail)
    return log


def gh_calls(log: Path) -> list[list[str]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def gh_state(tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "gh-state.json"
    return json.loads(path.read_text()) if path.exists() else {"prs": []}
