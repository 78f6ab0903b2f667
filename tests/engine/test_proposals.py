"""Self-evolution as proposals (issue 31, item 3; invariant 10), end to end: a real scripted
hostile maker (the command backend, a real process in the sandbox) edits its loop's own
definitions or writes a proposal file; nothing of it takes effect or is committed, a proposal
waits in the inbox, and `inbox approve` applies it only when it is still what it was made
against, `validate` passes and the loop's recorded tasks still pass under it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import invoke, run_loopctl
from support.journal import events
from support.processes import SAFETY_NET
from support.repos import FAST_CHECK, GOAL_BRANCH, PY, commit_all, git, make_project, toml_value

TASK = "tests-green"
HOSTILE = '\nallow = ["*"]\n'


def _hostile(repo: Path, *ops: dict[str, str]) -> None:
    make_project(repo, "edits_definitions.py", json.dumps(list(ops)))


def _goal(monkeypatch: pytest.MonkeyPatch, repo: Path, code: int = 0) -> None:
    result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")
    assert result.exit_code == code, result.output


def _proposals(repo: Path) -> list[dict[str, object]]:
    return [dict(e.data) for e in events(repo, "proposal_made")]


def _open_proposal(repo: Path) -> str:
    (item,) = [e for e in events(repo, "inbox_opened") if e.data["kind"] == "proposal"]
    return str(item.data["id"])


def _committed_paths(repo: Path) -> list[str]:
    (commit,) = events(repo, "commit_created", TASK)
    sha = str(commit.data["sha"])
    return git(repo, "diff", "--name-only", f"{sha}^", sha).split()


def _without_cassettes(repo: Path, gate: str) -> None:
    """For the `checks` gate: the runs' cassettes removed, no run replays (item 5's `replay`
    gate answers whenever one does)."""
    if gate == "checks":
        for cassette in (repo / ".loop" / "runs").rglob("*.cassette.jsonl"):
            cassette.unlink()


def _approve(monkeypatch: pytest.MonkeyPatch, repo: Path, item: str) -> dict[str, object]:
    result = invoke(monkeypatch, repo, "inbox", "approve", item, "--json")
    answer: dict[str, object] = json.loads(result.output)["inbox_action"]
    assert result.exit_code == (0 if answer["ok"] else 1), result.output
    return answer


@pytest.mark.parametrize("gate", ["replay", "checks"])
def test_a_hostile_allow_all_changes_nothing_and_leaves_a_proposal_that_applies(
    repo: Path, monkeypatch: pytest.MonkeyPatch, gate: str
) -> None:
    _hostile(repo, {"op": "append", "path": ".loop/config.toml", "text": HOSTILE})
    config = (repo / ".loop" / "config.toml").read_bytes()
    head = git(repo, "rev-parse", "HEAD").strip()

    _goal(monkeypatch, repo)

    # The rest of the attempt went on: checked, passed, committed, without the self-edit.
    assert (repo / ".loop" / "config.toml").read_bytes() == config
    assert _committed_paths(repo) == ["calc.py"]
    assert git(repo, "show", f"{GOAL_BRANCH}:.loop/config.toml").encode() == config
    assert git(repo, "rev-parse", "HEAD").strip() == head
    (made,) = _proposals(repo)
    assert made["source"] == "edit"
    assert made["paths"] == [".loop/config.toml"]
    item = _open_proposal(repo)
    shown = invoke(monkeypatch, repo, "inbox", "show", item)
    assert 'allow = ["*"]' in shown.output
    assert "Proposes changing: .loop/config.toml" in shown.output

    diff = run_loopctl(repo, "inbox", "diff", item)
    assert diff.returncode == 0, diff.stderr
    assert '+allow = ["*"]' in diff.stdout
    patch = repo.parent / "proposal.patch"
    patch.write_text(diff.stdout)
    git(repo, "apply", "--check", str(patch))  # what approving applies, as git takes it

    _without_cassettes(repo, gate)
    # The real CLI, in its own process.
    approved = run_loopctl(repo, "inbox", "approve", item, "--json", timeout=SAFETY_NET)

    assert approved.returncode == 0, approved.stderr
    answer = json.loads(approved.stdout)["inbox_action"]
    assert answer["ok"] is True, answer
    proposal = answer["proposal"]
    assert isinstance(proposal, dict)
    assert proposal["gate"] == gate
    assert proposal["checked"] == [TASK]
    new = git(repo, "rev-parse", "HEAD").strip()
    assert new == proposal["commit"]
    assert git(repo, "rev-parse", "HEAD^").strip() == head  # one commit, on the old HEAD
    assert git(repo, "diff", "--name-only", head, new).split() == [".loop/config.toml"]
    assert (repo / ".loop" / "config.toml").read_bytes() == config + HOSTILE.encode()
    assert git(repo, "status", "--porcelain", "--", ".loop/config.toml") == ""
    assert invoke(monkeypatch, repo, "validate").exit_code == 0
    (applied,) = events(repo, "proposal_applied")
    assert applied.data["commit"] == new
    # At most once: the item is closed.
    again = invoke(monkeypatch, repo, "inbox", "approve", item)
    assert again.exit_code == 1
    assert "already closed" in again.output


@pytest.mark.parametrize(
    ("ops", "stripped"),
    [
        (
            [{"op": "write", "path": ".loop/loops/evil.toml", "text": 'every = "1m"\n'}],
            [".loop/loops/evil.toml"],
        ),
        (
            [{"op": "append", "path": "agents/maker.toml", "text": 'env.allow = ["*"]\n'}],
            ["agents/maker.toml"],
        ),
        (
            [{"op": "write", "path": "skills/own/SKILL.md", "text": "---\nname: own\n---\n"}],
            ["skills/own/SKILL.md"],
        ),
    ],
    ids=["new-loop", "own-agent", "new-skill"],
)
def test_edits_of_other_definition_files_become_proposals_too(
    repo: Path, monkeypatch: pytest.MonkeyPatch, ops: list[dict[str, str]], stripped: list[str]
) -> None:
    _hostile(repo, *ops)
    before = git(repo, "ls-files", "-s")

    _goal(monkeypatch, repo)

    assert _committed_paths(repo) == ["calc.py"]
    assert git(repo, "ls-files", "-s") == before
    assert not (repo / stripped[0]).exists() or stripped[0] == "agents/maker.toml"
    (made,) = _proposals(repo)
    assert made["paths"] == stripped
    assert made.get("refused") is None
    (note,) = [e for e in events(repo, "note", TASK) if e.data.get("what") == "self_edit_stripped"]
    assert note.data["paths"] == stripped


@pytest.mark.parametrize(
    ("ops", "why"),
    [
        # A loop file that is a link out of the repository.
        ([{"op": "link", "path": ".loop/loops/evil.toml", "target": "/etc/hostname"}], "link"),
        # The whole .loop folder swapped for a link to a folder of the agent's.
        (
            [
                {"op": "write", "path": "elsewhere/config.toml", "text": HOSTILE},
                {"op": "link", "path": ".loop", "target": "elsewhere"},
            ],
            "not a definition file",
        ),
    ],
    ids=["loop-file-link", "loop-folder-link"],
)
def test_links_into_the_definitions_are_stripped_and_refused(
    repo: Path, monkeypatch: pytest.MonkeyPatch, ops: list[dict[str, str]], why: str
) -> None:
    _hostile(repo, *ops)
    config = (repo / ".loop" / "config.toml").read_bytes()

    _goal(monkeypatch, repo)

    assert (repo / ".loop" / "config.toml").read_bytes() == config
    committed = _committed_paths(repo)
    assert not any(p.startswith(".loop") for p in committed), committed
    (made,) = _proposals(repo)
    assert why in str(made["refused"])
    assert [e for e in events(repo, "inbox_opened") if e.data["kind"] == "proposal"] == []


def _proposal_file(name: str, diff: str, rationale: str = "Why: it helps.\n") -> dict[str, str]:
    text = f"{rationale}\n```diff\n{diff}```\n"
    return {"op": "write", "path": f".loop-proposals/{name}", "text": text}


CONDITION_LINE = f'"tests green" = {toml_value(FAST_CHECK)}'


def _config_diff(old: str, new: str) -> str:
    return f"--- a/.loop/config.toml\n+++ b/.loop/config.toml\n@@ -7 +7 @@\n-{old}\n+{new}\n"


def test_a_proposal_file_is_taken_out_of_the_attempt_and_applies(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo)  # to read the config's lines
    lines = (repo / ".loop" / "config.toml").read_text().splitlines()
    assert lines[6] == CONDITION_LINE, lines
    diff = _config_diff(CONDITION_LINE, CONDITION_LINE.replace('"-B", ', ""))
    _hostile(repo, _proposal_file("faster.md", diff))

    _goal(monkeypatch, repo)

    assert _committed_paths(repo) == ["calc.py"]  # the proposal file is not the task's work
    (made,) = _proposals(repo)
    assert made["source"] == "file:faster.md"
    assert made.get("refused") is None
    assert made["rationale"] == "Why: it helps."
    answer = _approve(monkeypatch, repo, _open_proposal(repo))
    assert answer["ok"] is True, answer
    assert '"-B"' not in (repo / ".loop" / "config.toml").read_text().splitlines()[6]


@pytest.mark.parametrize(
    ("diff", "why"),
    [
        ("--- a/../outside.txt\n+++ b/../outside.txt\n@@ -0,0 +1 @@\n+x\n", "leaves its folder"),
        ("--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n-x\n+y\n", "not a definition file"),
        ("--- /dev/null\n+++ b//etc/passwd\n@@ -0,0 +1 @@\n+x\n", "absolute"),
        (
            "diff --git a/.loop/loops/l.toml b/.loop/loops/l.toml\nnew file mode 120000\n"
            "--- /dev/null\n+++ b/.loop/loops/l.toml\n@@ -0,0 +1 @@\n+/etc/passwd\n",
            "symbolic link",
        ),
        ("--- a/.loop/config.toml\n+++ b/.loop/config.toml\n@@ -1 +1 @@\n-nope\n+x\n", "apply"),
    ],
    ids=["traversal", "outside-definitions", "absolute", "symlink", "does-not-apply"],
)
def test_a_proposal_file_outside_the_definitions_is_refused(
    repo: Path, monkeypatch: pytest.MonkeyPatch, diff: str, why: str
) -> None:
    _hostile(repo, _proposal_file("evil.md", diff))

    _goal(monkeypatch, repo)

    assert _committed_paths(repo) == ["calc.py"]
    (made,) = _proposals(repo)
    assert why in str(made["refused"]), made
    assert [e for e in events(repo, "inbox_opened") if e.data["kind"] == "proposal"] == []


def test_a_proposal_file_that_is_a_link_is_refused(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _hostile(repo, {"op": "link", "path": ".loop-proposals/x.md", "target": "/etc/hostname"})

    _goal(monkeypatch, repo)

    (made,) = _proposals(repo)
    assert "cannot be read as a plain file" in str(made["refused"])
    assert _committed_paths(repo) == ["calc.py"]


@pytest.mark.parametrize("gate", ["replay", "checks"])
def test_a_proposal_that_breaks_a_recorded_task_is_refused_naming_it(
    repo: Path, monkeypatch: pytest.MonkeyPatch, gate: str
) -> None:
    failing = (PY, "-c", "import calc; assert calc.add(2, 3) == 6")
    diff = _config_diff(CONDITION_LINE, f'"tests green" = {toml_value(failing)}')
    _hostile(repo, _proposal_file("stricter.md", diff))
    config = (repo / ".loop" / "config.toml").read_bytes()
    head = git(repo, "rev-parse", "HEAD").strip()
    _goal(monkeypatch, repo)
    item = _open_proposal(repo)
    _without_cassettes(repo, gate)

    answer = _approve(monkeypatch, repo, item)

    assert answer["ok"] is False
    proposal = answer["proposal"]
    assert isinstance(proposal, dict)
    assert proposal["broken_task"] == TASK
    assert proposal["stage"] == "regression"
    assert f"breaks task {TASK!r}" in str(answer["message"])
    assert (repo / ".loop" / "config.toml").read_bytes() == config
    assert git(repo, "rev-parse", "HEAD").strip() == head
    (refused,) = events(repo, "proposal_refused")
    assert refused.data["task"] == TASK
    assert refused.data["gate"] == gate


@pytest.mark.parametrize("gate", ["replay", "checks"])
def test_a_proposal_that_protects_what_a_recorded_task_changed_is_refused(
    repo: Path, monkeypatch: pytest.MonkeyPatch, gate: str
) -> None:
    loop = 'goal = "tests green"\nprompt = "fix calc"\n\n[budget]\nmax_iterations = 1\n'
    diff = (
        "--- a/.loop/loops/fix.toml\n+++ b/.loop/loops/fix.toml\n"
        '@@ -4,2 +4,5 @@\n [budget]\n max_iterations = 1\n+\n+[checker]\n+protect = ["calc.py"]\n'
    )
    _hostile(repo, _proposal_file("protect.md", diff))
    (repo / ".loop" / "loops").mkdir(exist_ok=True)
    (repo / ".loop" / "loops" / "fix.toml").write_text(loop)
    commit_all(repo, "a loop")
    result = invoke(monkeypatch, repo, "run", "fix", "--once")
    assert result.exit_code == 0, result.output
    _without_cassettes(repo, gate)

    answer = _approve(monkeypatch, repo, _open_proposal(repo))

    assert answer["ok"] is False
    assert "breaks task 'main'" in str(answer["message"])
    if gate == "checks":
        assert "calc.py (protected by calc.py)" in str(answer["message"])
    assert (repo / ".loop" / "loops" / "fix.toml").read_text() == loop


def test_a_proposal_made_against_old_definitions_is_refused(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _hostile(repo, {"op": "append", "path": ".loop/config.toml", "text": HOSTILE})
    _goal(monkeypatch, repo)
    item = _open_proposal(repo)
    with (repo / ".loop" / "config.toml").open("a") as handle:
        handle.write("\n# the human edited the rules meanwhile\n")
    commit_all(repo, "the human's change to the config")
    config = (repo / ".loop" / "config.toml").read_bytes()
    head = git(repo, "rev-parse", "HEAD").strip()

    answer = _approve(monkeypatch, repo, item)

    assert answer["ok"] is False
    assert "the definitions changed since it was proposed" in str(answer["message"])
    assert ".loop/config.toml" in str(answer["message"])
    assert (repo / ".loop" / "config.toml").read_bytes() == config
    assert git(repo, "rev-parse", "HEAD").strip() == head


def test_an_uncommitted_edit_of_the_definitions_also_makes_it_stale(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _hostile(repo, {"op": "append", "path": ".loop/config.toml", "text": HOSTILE})
    _goal(monkeypatch, repo)
    (repo / "agents" / "new.toml").write_text('backend = "command"\nargv = ["true"]\n')

    answer = _approve(monkeypatch, repo, _open_proposal(repo))

    assert answer["ok"] is False
    assert "agents/new.toml" in str(answer["message"])


def test_a_proposal_that_makes_the_definitions_invalid_is_refused_naming_the_line(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _hostile(
        repo,
        {
            "op": "append",
            "path": ".loop/config.toml",
            "text": '\n[budget]\nmax_iterations = "lots"\n',
        },
    )
    config = (repo / ".loop" / "config.toml").read_bytes()
    _goal(monkeypatch, repo)

    answer = _approve(monkeypatch, repo, _open_proposal(repo))

    assert answer["ok"] is False
    assert ".loop/config.toml:" in str(answer["message"]), answer
    proposal = answer["proposal"]
    assert isinstance(proposal, dict)
    assert proposal["stage"] == "validate"
    assert (repo / ".loop" / "config.toml").read_bytes() == config


def test_reject_discards_a_proposal(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _hostile(repo, {"op": "append", "path": ".loop/config.toml", "text": HOSTILE})
    config = (repo / ".loop" / "config.toml").read_bytes()
    _goal(monkeypatch, repo)
    item = _open_proposal(repo)

    result = invoke(monkeypatch, repo, "inbox", "reject", item, "--json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["inbox_action"]["ok"] is True
    assert (repo / ".loop" / "config.toml").read_bytes() == config
    assert events(repo, "proposal_applied") == []
    (closed,) = [e for e in events(repo, "inbox_closed") if e.data["id"] == item]
    assert closed.data["resolution"] == "rejected"


def test_allow_self_edit_keeps_the_old_opt_out(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _hostile(repo, {"op": "append", "path": ".loop/loops/fix.toml", "text": "# more\n"})
    loop = 'goal = "tests green"\nprompt = "fix calc"\n\n[maker]\nallow_self_edit = true\n'
    (repo / ".loop" / "loops").mkdir(exist_ok=True)
    (repo / ".loop" / "loops" / "fix.toml").write_text(loop)
    commit_all(repo, "a loop that may edit itself")

    result = invoke(monkeypatch, repo, "run", "fix", "--once")

    assert result.exit_code == 0, result.output
    (commit,) = events(repo, "commit_created")
    sha = str(commit.data["sha"])
    changed = git(repo, "diff", "--name-only", f"{sha}^", sha).split()
    assert changed == [".loop/loops/fix.toml", "calc.py"]
    assert _proposals(repo) == []


def test_a_proposal_applies_on_a_head_that_moved_elsewhere(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _hostile(repo, {"op": "append", "path": ".loop/config.toml", "text": HOSTILE})
    _goal(monkeypatch, repo)
    (repo / "notes.txt").write_text("the human's own work\n")
    commit_all(repo, "unrelated work")
    head = git(repo, "rev-parse", "HEAD").strip()

    answer = _approve(monkeypatch, repo, _open_proposal(repo))

    assert answer["ok"] is True, answer
    assert git(repo, "rev-parse", "HEAD^").strip() == head
    assert (repo / "notes.txt").read_text() == "the human's own work\n"
