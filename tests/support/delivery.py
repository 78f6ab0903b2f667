"""Delivery and inbox tests: delivering loops, custom actions that record themselves, the inbox."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from support.cli import invoke
from support.repos import PY, TESTS, write_loop

RECORD = TESTS / "programs" / "record_action.py"


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
