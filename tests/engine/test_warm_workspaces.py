"""Warm workspaces end to end: `loopctl run` recycles finished worktrees, runs setup once per
inputs hash, and a hostile maker's leftovers never reach the next task (sandbox on)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.cli import invoke
from support.journal import events
from support.repos import AGENTS, PY, commit_all, git, make_project, toml_value, write_loop

from loopctl.definitions.config import Config
from loopctl.definitions.loops import load_loop
from loopctl.definitions.source import Problems

INSTALL = (
    "import pathlib\n"
    "root = pathlib.Path('node_modules')\n"
    "for name in ('left-pad', 'is-odd', 'is-even'):\n"
    "    (root / name).mkdir(parents=True, exist_ok=True)\n"
    "    (root / name / 'index.js').write_text(f'module.exports = {name!r}\\n')\n"
)


def _notes(repo: Path, what: str) -> list[dict[str, object]]:
    return [e.data | {"task": e.task} for e in events(repo, "note") if e.data.get("what") == what]


def _project(repo: Path, tmp_path: Path, agent: str = "fixer.py", pool: str = "") -> Path:
    records = tmp_path / "records"
    records.mkdir()
    make_project(repo, agent, *([records] if agent == "plants_in_pool.py" else []))
    (repo / ".gitignore").write_text("__pycache__/\n.pytest_cache/\nnode_modules/\n*.log\nbuild/\n")
    (repo / "package.json").write_text('{"name": "calc"}\n')
    (repo / "package-lock.json").write_text('{"lockfileVersion": 3}\n')
    tasks = [{"id": f"t{n}"} for n in (1, 2, 3)]
    write_loop(
        repo,
        "warm",
        'goal = "tests green"\n\n'
        f"[tasks]\ncommand = {toml_value([PY, '-c', f'print({json.dumps(tasks)!r})'])}\n"
        'prompt = "fix {id}"\n\n'
        "[budget]\nmax_parallel = 1\n\n"
        f"[worktree]\nsetup = [{toml_value([PY, '-c', INSTALL])}]\n{pool}",
    )
    commit_all(repo, "npm-ish project")
    return records


def test_later_tasks_reuse_the_worktree_and_skip_setup(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(repo, tmp_path)

    result = invoke(monkeypatch, repo, "run", "warm", "--once")

    assert result.exit_code == 0, result.output
    ready = {n["task"]: n["pool"] for n in _notes(repo, "workspace_ready")}
    assert ready == {"t1": "miss", "t2": "hit", "t3": "hit"}
    decisions = {n["task"]: n["decision"] for n in _notes(repo, "workspace_ready")}
    assert decisions == {"t1": "ran", "t2": "skipped", "t3": "skipped"}
    (first,) = [n for n in _notes(repo, "workspace_ready") if n["task"] == "t1"]
    assert first["published"] is True
    assert first["inputs"] == ["package.json", "package-lock.json"]
    assert first["preserve"] == ["node_modules"]
    assert len(_notes(repo, "setup")) == 1  # the command ran once, for t1
    for task in ("t1", "t2", "t3"):  # each task's commit holds its change and nothing else
        changed = git(repo, "diff", "--name-only", "main", f"loop/warm/{task}").split()
        assert changed == ["calc.py"], task
    listed = invoke(monkeypatch, repo, "worktrees", "--json")
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.output)["worktrees"]
    assert [r["loop"] for r in rows if r["kind"] == "pooled"] == ["warm"]
    (seed,) = [r for r in rows if r["kind"] == "seed"]
    assert seed["files"] == 3
    assert seed["bytes"] > 0
    status = invoke(monkeypatch, repo, "status", "--json")
    (row,) = [r for r in json.loads(status.output)["status"] if r["loop"] == "warm"]
    warmth = row["warm_workspaces"]
    assert (warmth["pool_hits"], warmth["setups_skipped"], warmth["setups_run"]) == (2, 2, 1)


def test_without_the_pool_each_task_gets_a_fresh_worktree_and_a_seed(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(repo, tmp_path, pool="pool = false\n")

    result = invoke(monkeypatch, repo, "run", "warm", "--once")

    assert result.exit_code == 0, result.output
    assert {n["pool"] for n in _notes(repo, "workspace_ready")} == {"miss"}
    decisions = {n["task"]: n["decision"] for n in _notes(repo, "workspace_ready")}
    assert decisions == {"t1": "ran", "t2": "seeded", "t3": "seeded"}
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_a_hostile_makers_leftovers_do_not_reach_the_next_task(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = _project(repo, tmp_path, agent="plants_in_pool.py")

    result = invoke(monkeypatch, repo, "run", "warm", "--once")

    assert result.exit_code == 0, result.output
    ready = {n["task"]: n for n in _notes(repo, "workspace_ready")}
    assert ready["t2"]["pool"] == "hit"
    assert ready["t2"]["discarded"] == ["node_modules"]  # t1 wrote into it
    decisions = {n["task"]: n["decision"] for n in _notes(repo, "workspace_ready")}
    assert decisions == {"t1": "ran", "t2": "seeded", "t3": "skipped"}
    # What t2's maker saw is what a fresh worktree plus setup gives (calc.py fixed by itself).
    fresh = tmp_path / "fresh"
    git(repo, "worktree", "add", "-q", "--detach", str(fresh), "main")
    subprocess.run([PY, "-c", INSTALL], cwd=fresh, check=True)
    calc = fresh / "calc.py"
    calc.write_text(calc.read_text().replace("a - b", "a + b"))
    expected = {
        path.relative_to(fresh).as_posix(): path.read_text()
        for path in sorted(fresh.rglob("*"))
        if path.is_file() and path != fresh / ".git"
    }
    for task in ("t2", "t3"):
        seen = json.loads((records / f"{task}.json").read_text())
        assert seen == expected, task
    # And git in the recycled worktree has no flags or config of t1's.
    pooled = [p for p in (tmp_path / "home").glob("**/.pool/warm/idle/*") if p.is_dir()]
    for path in pooled:
        assert git(path, "ls-files", "-v", "README.md").startswith("H ")


def test_the_hostile_agent_script_is_present() -> None:
    assert (AGENTS / "plants_in_pool.py").is_file()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('preserve = ["../outside"]', "plain folder path inside the repository"),
        ('preserve = ["node_modules/*"]', "plain folder path"),
        ('preserve = [".git"]', "not .git or .loop"),
        ('setup_inputs = ["/etc/passwd"]', "inside the repository"),
        ('setup_inputs = ["**/package.json"]', "no '**'"),
        ("pool = 3", "true or false"),
    ],
)
def test_bad_worktree_settings_are_refused_with_their_line(
    repo: Path, body: str, message: str
) -> None:
    path = write_loop(repo, "bad", f'prompt = "x"\n\n[worktree]\n{body}\n')
    problems = Problems()
    load_loop(path, problems, Config())
    assert problems.errors, body
    first = problems.errors[0]
    assert first.line == 4
    assert message in first.message


def test_bad_seed_limits_are_refused_with_their_line(repo: Path) -> None:
    from loopctl.definitions.config import load_config

    path = repo / ".loop" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text('version = 1\n\n[worktree]\nmax_seed_size = "lots"\nmax_seed_age = "7d"\n')
    problems = Problems()
    config = load_config(path, problems)
    assert [(p.line, "size" in p.message) for p in problems.errors] == [(4, True)]
    assert config.max_seed_age_s == 7 * 86400


def test_prune_drops_seeds_beyond_the_size_and_pools_of_loops_that_no_longer_pool(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(repo, tmp_path)
    assert invoke(monkeypatch, repo, "run", "warm", "--once").exit_code == 0
    config = repo / ".loop" / "config.toml"
    config.write_text(config.read_text() + '\n[worktree]\nmax_seed_size = "1kB"\n')
    loop = repo / ".loop" / "loops" / "warm.toml"
    loop.write_text(loop.read_text() + "pool = false\n")

    dry = invoke(monkeypatch, repo, "worktrees", "prune", "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    assert sorted(r["kind"] for r in json.loads(dry.output)["pruned"]) == ["pooled", "seed"]
    pruned = invoke(monkeypatch, repo, "worktrees", "prune")

    assert pruned.exit_code == 0, pruned.output
    assert "removed seed" in pruned.output
    assert "removed pooled" in pruned.output
    rows = json.loads(invoke(monkeypatch, repo, "worktrees", "--json").output)["worktrees"]
    assert [r for r in rows if r["kind"] != "task"] == []
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_the_log_says_how_each_workspace_came(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(repo, tmp_path)
    assert invoke(monkeypatch, repo, "run", "warm", "--once").exit_code == 0

    shown = invoke(monkeypatch, repo, "log", "warm")

    assert shown.exit_code == 0, shown.output
    assert "pool miss, setup ran (no seed for these setup inputs)" in shown.output
    assert (
        "pool hit, setup skipped (setup inputs unchanged and preserved folders intact)"
        in shown.output
    )
