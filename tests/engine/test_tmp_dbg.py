from pathlib import Path
import pytest
from support.repos import make_project
from support.journal import events
from support.cli import invoke

def test_dbg(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_project(repo, "edits_loop.py", ".loop/config.toml")
    result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")
    print(result.output)
    for e in (repo / ".loop/log/events.jsonl").read_text().splitlines():
        print(e[:400])
    assert 0
