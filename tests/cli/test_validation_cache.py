"""`loopctl validate` replays its last answer only while no definition file has changed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from loopctl.cli.validation_cache import definitions_key
from loopctl.commands.init import init_project


def validate(repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopctl", "validate"], cwd=repo, capture_output=True, text=True
    )


def test_an_edit_is_seen_at_once_and_an_unchanged_tree_replays_the_same_answer(
    repo: Path,
) -> None:
    init_project(repo, which=lambda _: None)
    first = validate(repo)
    cached = repo / ".loop" / "cache" / "validate-text.json"
    assert first.returncode == 0
    assert cached.exists()
    replay = validate(repo)
    assert (replay.returncode, replay.stdout, replay.stderr) == (0, first.stdout, first.stderr)
    # A hit replays the remembered answer, not a fresh one: mark the remembered one and see it.
    saved = json.loads(cached.read_text())
    assert (saved["stdout"], saved["exit_code"]) == (first.stdout, 0)
    cached.write_text(json.dumps({**saved, "stdout": "remembered answer\n", "exit_code": 3}))
    hit = validate(repo)
    assert (hit.returncode, hit.stdout) == (3, "remembered answer\n")
    # A remembered answer under another key is never replayed: a fresh validation instead.
    cached.write_text(json.dumps({**saved, "key": "0" * 64, "stdout": "stale\n"}))
    fresh = validate(repo)
    assert (fresh.returncode, fresh.stdout) == (0, first.stdout)
    assert json.loads(cached.read_text())["key"] == saved["key"]  # and it is remembered again

    loop = repo / ".loop" / "loops" / "example.toml"
    loop.write_text('evrey = "5m"\n' + loop.read_text())
    broken = validate(repo)
    assert broken.returncode == 2
    assert "example.toml" in broken.stdout
    assert "did you mean 'every'" in broken.stdout
    assert validate(repo).stdout == broken.stdout  # the broken answer is remembered too

    new_skill = repo / ".agents" / "skills" / "new-skill"
    new_skill.mkdir()
    # A new folder alone changes the key: the marked answer under the old key is not replayed.
    saved = json.loads(cached.read_text())
    cached.write_text(json.dumps({**saved, "stdout": "remembered answer\n"}))
    after = validate(repo)
    assert after.stdout != "remembered answer\n"
    assert "example.toml" in after.stdout  # still the real (broken) answer


def test_no_cache_without_the_gitignore_that_keeps_it_out_of_commits(repo: Path) -> None:
    init_project(repo, which=lambda _: None)
    (repo / ".loop" / ".gitignore").write_text("log/\n")
    assert validate(repo).returncode == 0
    assert not (repo / ".loop" / "cache").exists()


def test_a_symlink_among_the_definitions_turns_the_cache_off(repo: Path) -> None:
    init_project(repo, which=lambda _: None)
    assert definitions_key(repo, "text") is not None
    agents = repo / ".loop" / "agents"
    (agents / "linked.toml").symlink_to(agents / "command-maker.toml")
    assert definitions_key(repo, "text") is None
