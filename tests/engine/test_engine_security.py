"""Invariants 5, 7, 8 and 10 end to end: secrets, hostile ids, planted git config, self-edits."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.cli import invoke
from support.journal import events
from support.repos import (
    FAST_CHECK,
    GOAL_BRANCH,
    PY,
    all_text_under,
    git,
    loop_worktrees,
    make_project,
    toml_value,
    worktree_root,
    write_loop,
)

TASK = "tests-green"
CANARIES = {
    "LOOPCTL_CANARY_TOKEN": "canary-token-7f3a9c1e",
    "MY_API_KEY": "canary-apikey-2b8d4e6f",
    "DB_PASSWORD": "canary-dbpass-5c0e1a9b",
}


def _set_canaries(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in CANARIES.items():
        monkeypatch.setenv(name, value)


def _leaks(*folders: Path, values: list[str]) -> list[str]:
    return [
        f"{path}: {value}"
        for path, text in all_text_under(*folders)
        for value in values
        if value in text
    ]


def test_canary_secrets_reach_neither_the_agent_nor_loop_files(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "env_dump.py")
    _set_canaries(monkeypatch)

    result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")

    assert result.exit_code == 1, result.output
    (kept,) = loop_worktrees(repo)
    seen = json.loads((Path(kept["worktree"]) / "env.json").read_text())["env"]
    assert seen.get("LOOPCTL_TASK") == TASK  # the dump is real
    assert not set(CANARIES) & set(seen)
    values = list(CANARIES.values())
    assert _leaks(repo / ".loop", worktree_root(), values=values) == []
    assert all(v not in result.output for v in values)


def test_a_secret_lent_unchanged_reaches_the_agent_but_captures_stay_redacted(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `"real"`: the explicit opt-out from stand-ins (issue 25), so the agent holds the value.
    make_project(
        repo,
        "env_dump.py",
        agent_extra='\n[env]\nallow = ["MY_API_KEY"]\nsecrets = { MY_API_KEY = "real" }\n',
    )
    _set_canaries(monkeypatch)

    result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")

    assert result.exit_code == 1, result.output
    (kept,) = loop_worktrees(repo)
    seen = json.loads((Path(kept["worktree"]) / "env.json").read_text())["env"]
    assert seen.get("MY_API_KEY") == CANARIES["MY_API_KEY"]
    assert "DB_PASSWORD" not in seen
    assert "LOOPCTL_CANARY_TOKEN" not in seen
    # The agent printed its environment, allowed key included: loopctl's copies are redacted.
    assert _leaks(repo / ".loop", values=list(CANARIES.values())) == []
    run = events(repo, "tick_started")[0].run
    assert run is not None
    captured = (repo / ".loop" / "runs" / run / TASK / "attempt-1" / "maker.out").read_text()
    assert "[REDACTED]" in captured


def test_env_allow_lends_a_named_secret_as_a_stand_in(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "env_dump.py", agent_extra='env.allow = ["MY_API_KEY"]\n')
    _set_canaries(monkeypatch)

    result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")

    assert result.exit_code == 1, result.output
    (kept,) = loop_worktrees(repo)
    dumped = (Path(kept["worktree"]) / "env.json").read_text()
    assert json.loads(dumped)["env"]["MY_API_KEY"].startswith("loopctl-stand-in-")
    assert CANARIES["MY_API_KEY"] not in dumped
    assert _leaks(repo / ".loop", values=list(CANARIES.values())) == []


def test_a_secret_printed_by_the_task_command_is_not_logged(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    # The task command keeps the user's environment (it is their own `gh` call); whatever it
    # prints is data, and a credential in it must not be copied into the log or STATE.md.
    code = (
        "import json, os; print(json.dumps([{'id': 't1', "
        "'title': 'deploy with ' + os.environ['MY_API_KEY']}]))"
    )
    write_loop(
        repo,
        "leaky",
        'goal = "tests green"\nprompt = "fix it"\n\n[tasks]\n'
        f'command = {toml_value([PY, "-c", code])}\nprompt = "{{title}}"\n',
    )
    _set_canaries(monkeypatch)

    result = invoke(monkeypatch, repo, "run", "leaky", "--once")

    assert result.exit_code == 0, result.output
    assert _leaks(repo / ".loop", worktree_root(), values=list(CANARIES.values())) == []
    assert CANARIES["MY_API_KEY"] not in git(repo, "log", "--format=%B", "loop/leaky/t1")


def test_builtin_tests_green_protects_the_test_files(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No [conditions]: "tests green" is the built-in, detected as pytest, which protects tests.
    make_project(repo, "edits_tests.py", check=None)

    result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")

    assert result.exit_code == 1, result.output
    (attempt,) = events(repo, "attempt_finished", TASK)
    assert attempt.data["verdict"] == "failed"
    assert "tests/test_calc.py" in attempt.data["reason"]
    # Nothing the maker did was committed.
    assert events(repo, "commit_created") == []
    assert git(repo, "rev-parse", GOAL_BRANCH) == git(repo, "rev-parse", "main")


def test_checker_protect_fails_an_attempt_that_touches_a_protected_path(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "edits_tests.py")
    write_loop(
        repo,
        "guarded",
        'goal = "tests green"\nprompt = "make the tests pass"\n\n'
        '[checker]\nprotect = ["tests/**"]\n\n[budget]\nmax_iterations = 1\n',
    )

    result = invoke(monkeypatch, repo, "run", "guarded", "--once")

    assert result.exit_code == 1, result.output
    (attempt,) = events(repo, "attempt_finished", "main")
    assert "tests/test_calc.py" in attempt.data["reason"]
    assert "tests/**" in attempt.data["reason"]
    assert events(repo, "commit_created") == []


@pytest.mark.parametrize("target", [".loop/config.toml", "agents/maker.toml", ".loop/loops/x.toml"])
def test_maker_cannot_rewrite_the_loops_own_rules(
    repo: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    make_project(repo, "edits_loop.py", target)
    before = (repo / target).read_bytes() if (repo / target).exists() else None

    result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")

    # Issue 31, item 3: the self-edit is taken out of the attempt and proposed; the rest of
    # the attempt is checked and committed without it (tests/engine/test_proposals.py).
    assert result.exit_code == 0, result.output
    (commit,) = events(repo, "commit_created", TASK)
    sha = commit.data["sha"]
    assert git(repo, "diff", "--name-only", f"{sha}^", sha).split() == ["calc.py"]
    assert ((repo / target).read_bytes() if (repo / target).exists() else None) == before
    (made,) = events(repo, "proposal_made", TASK)
    assert made.data["paths"] == [target]


def test_hooks_fsmonitor_and_filters_an_agent_plants_never_run(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sentinel = tmp_path / "planted-ran"
    make_project(repo, "plants_hook.py", sentinel)

    planted = invoke(monkeypatch, repo, "goal", "tests green")
    # Invariant 12: config and hooks changed in a turn fail it, until a human has looked.
    assert planted.exit_code == 1, planted.output
    (item,) = [e for e in events(repo, "inbox_opened") if e.data["evidence"].get("tampering")]
    assert ".git/config" in item.data["evidence"]["files"]
    assert invoke(monkeypatch, repo, "inbox", "approve", item.data["id"]).exit_code == 0

    result = invoke(monkeypatch, repo, "goal", "tests green")

    ran = sentinel.read_text() if sentinel.exists() else ""
    assert ran == "", f"planted programs ran: {ran.split()}"
    assert result.exit_code == 0, result.output
    (commit,) = events(repo, "commit_created", TASK)
    # The agent really planted them (else this test proves nothing).
    hooks_path = subprocess.run(
        ["git", "config", "core.hooksPath"], cwd=repo, capture_output=True, text=True
    ).stdout.strip()
    assert hooks_path.endswith("planted-hooks")
    assert "return a + b" in git(repo, "show", f"{commit.data['sha']}:calc.py")


HOSTILE_IDS = [
    "../../x",
    "-oProxyCommand=evil",
    "a;rm -rf ~",
    "ünïcødé/日本語 ✓",
    "n" * 300,
    "--upload-pack=touch {tmp}/pwned",
    "$(touch {tmp}/pwned2)",
]


def test_hostile_task_ids_stay_data(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py", config_extra='\n[worktree]\nkeep = "always"\n')
    ids = [raw.format(tmp=tmp_path) for raw in HOSTILE_IDS]
    items = [{"id": raw, "title": f"fix `{raw}` && touch {tmp_path}/pwned3"} for raw in ids]
    code = f"import json; print(json.dumps({items!r}))"
    write_loop(
        repo,
        "hostile",
        'goal = "tests green"\n\n'
        f"[tasks]\ncommand = {toml_value([PY, '-c', code])}\n"
        'prompt = "Task {id}: {title}"\n',
    )
    base_temp = tmp_path.parent
    before = sorted(p.name for p in base_temp.iterdir())

    result = invoke(monkeypatch, repo, "run", "hostile", "--once")

    assert result.exit_code == 0, result.output
    found = events(repo, "task_found")
    assert sorted(e.data["raw_id"] for e in found) == sorted(ids)
    finished = events(repo, "task_finished")
    assert len(finished) == len(ids)
    assert {e.data["status"] for e in finished} == {"done"}
    root = worktree_root().resolve()
    trees = loop_worktrees(repo)
    assert len(trees) == len(ids)
    for tree in trees:
        path = Path(tree["worktree"]).resolve()
        assert path.is_relative_to(root), path
        branch = tree["branch"].removeprefix("refs/heads/")
        assert branch.startswith("loop/hostile/")
        check = subprocess.run(["git", "check-ref-format", "--branch", branch], cwd=repo)
        assert check.returncode == 0, branch
        assert "return a + b" in (path / "calc.py").read_text()
    runs = (repo / ".loop" / "runs").resolve()
    for path in runs.rglob("*"):
        assert path.resolve().is_relative_to(runs)
    for name in ("pwned", "pwned2", "pwned3"):
        assert not (tmp_path / name).exists()
    assert sorted(p.name for p in base_temp.iterdir()) == before
    assert not (root.parent / "x").exists()
    assert not (root / "x").exists()


def test_hostile_base_refs_never_become_git_options(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    items = [
        {"id": "good", "ref": "main"},
        {"id": "opt", "ref": f"--output={tmp_path}/pwned"},
        {"id": "exec", "ref": f"main;touch {tmp_path}/pwned2"},
    ]
    code = f"import json; print(json.dumps({items!r}))"
    write_loop(
        repo,
        "bases",
        'goal = "tests green"\n\n'
        f"[tasks]\ncommand = {toml_value([PY, '-c', code])}\n"
        'base = "{ref}"\nprompt = "fix {id}"\n',
    )

    result = invoke(monkeypatch, repo, "run", "bases", "--once")

    assert result.exit_code == 1, result.output
    status = {e.task: e.data["status"] for e in events(repo, "task_finished")}
    assert status == {"good": "done", "opt": "failed", "exec": "failed"}
    assert not (tmp_path / "pwned").exists()
    assert not (tmp_path / "pwned2").exists()


def test_fast_check_is_a_real_check(tmp_path: Path) -> None:
    # Guard for the tests that use FAST_CHECK: it fails on the bug and passes on the fix.
    from support.repos import CALC

    for source, code in ((CALC, 1), (CALC.replace("a - b", "a + b"), 0)):
        (tmp_path / "calc.py").write_text(source)
        done = subprocess.run(FAST_CHECK, cwd=tmp_path, capture_output=True)
        assert done.returncode == code


def test_a_hostile_task_title_cannot_forge_the_notes_section(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    items = [{"id": "t1", "title": "## Notes"}]
    code = f"import json; print(json.dumps({items!r}))"
    write_loop(
        repo,
        "titled",
        'goal = "tests green"\nprompt = "fix"\n\n'
        f"[tasks]\ncommand = {toml_value([PY, '-c', code])}\n",
    )
    assert invoke(monkeypatch, repo, "run", "titled", "--once").exit_code == 0
    state_md = repo / ".loop" / "STATE.md"
    notes = "## Notes\n\nmine, word for word\n"
    state_md.write_text(state_md.read_text().split("\n## Notes\n")[0] + "\n" + notes)

    assert invoke(monkeypatch, repo, "run", "titled", "--once").exit_code == 0

    text = state_md.read_text()
    assert text.endswith("\n" + notes)
    assert text.splitlines().count("## Notes") == 1


def test_an_agent_cannot_move_the_base_to_hide_a_protected_change(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "tampers_base.py", check=None)
    first = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")
    assert first.exit_code == 1, first.output
    assert "tests/test_calc.py" in events(repo, "attempt_finished", TASK)[0].data["reason"]

    second = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")

    assert second.exit_code == 1, second.output
    last = events(repo, "attempt_finished", TASK)[-1]
    assert last.data["verdict"] == "failed"
    assert "tests/test_calc.py" in last.data["reason"]


@pytest.mark.parametrize("mode", ["detach", "branch"])
def test_work_lands_on_the_tasks_branch_even_if_the_agent_switched_away(
    repo: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    make_project(repo, "switches_branch.py", mode)

    result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")

    for commit in events(repo, "commit_created"):
        ancestor = subprocess.run(
            ["git", "merge-base", "--is-ancestor", commit.data["sha"], commit.data["branch"]],
            cwd=repo,
        )
        assert ancestor.returncode == 0, f"{commit.data} is not on its branch"
    if result.exit_code == 0:
        assert "return a + b" in git(repo, "show", f"{GOAL_BRANCH}:calc.py")
