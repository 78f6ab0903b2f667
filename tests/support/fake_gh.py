"""A fake `gh` first on PATH (tests/programs/fake_gh.py): records each call, keeps PR state."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from support.repos import PY, TESTS

PROGRAMS = TESTS / "programs"


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
