"""Protected paths and the maker's scope: what the maker changed, renames included, and what it
was not allowed to touch (issue 18: a renamed pytest.ini must stay protected, and a maker that
writes outside its scope must fail its attempt)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import invoke
from support.journal import events
from support.repos import commit_all, make_project, write_loop
from support.repos import git as run_git

from loopctl import git
from loopctl.checks.verdicts import protected_violations
from loopctl.errors import GitError


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "p"
    root.mkdir()
    run_git(root, "init", "-q", "-b", "main")
    (root / "pytest.ini").write_text("[pytest]\naddopts = -q\n")
    (root / "tests").mkdir()
    (root / "tests" / "conftest.py").write_text("import pytest\n")
    (root / "src").mkdir()
    (root / "src" / "a.py").write_text("A = 1\n")
    commit_all(root, "base")
    return root, run_git(root, "rev-parse", "HEAD").strip()


@pytest.mark.parametrize("old", ["pytest.ini", "tests/conftest.py"])
@pytest.mark.parametrize("committed", [True, False])
def test_a_renamed_file_is_listed_under_its_old_name_too(
    project: tuple[Path, str], old: str, committed: bool
) -> None:
    root, base = project
    # Content unchanged: git's rename detection would pair the two names exactly.
    run_git(root, "mv", old, "renamed.cfg")
    if committed:
        run_git(root, "commit", "-q", "-m", "rename")

    changed = git.changed_paths(root, base)

    assert changed == sorted([old, "renamed.cfg"])
    assert protected_violations(changed, protected=[old], scope=()) == [
        f"{old} (protected by {old})"
    ]


def test_a_path_outside_the_scope_is_a_violation_and_one_inside_is_not() -> None:
    problems = protected_violations(
        ["src/a.py", "docs/notes.md", "src/deep/b.py"], protected=[], scope=["src/**"]
    )
    assert problems == ["docs/notes.md (outside the loop's scope src/**)"]


def test_protection_wins_over_scope_and_no_scope_allows_everything() -> None:
    assert protected_violations(
        ["src/conftest.py", "README.md"], protected=["**/conftest.py"], scope=["src/**"]
    ) == [
        "src/conftest.py (protected by **/conftest.py)",
        "README.md (outside the loop's scope src/**)",
    ]
    assert protected_violations(["README.md", "x/y"], protected=[], scope=[]) == []


def test_a_maker_that_writes_outside_its_scope_fails_its_attempt(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # fixer.py fixes calc.py; the loop lets the maker change only docs/.
    make_project(repo, "fixer.py")
    write_loop(
        repo,
        "narrow",
        'goal = "tests green"\nprompt = "fix add"\n\n[maker]\nscope = ["docs/**"]\n\n'
        "[budget]\nmax_iterations = 1\n",
    )
    commit_all(repo, "narrow loop")

    result = invoke(monkeypatch, repo, "run", "narrow", "--once")

    assert result.exit_code == 1, result.output
    (attempt,) = events(repo, "attempt_finished", "main")
    assert attempt.data["verdict"] == "failed"
    assert "calc.py (outside the loop's scope docs/**)" in attempt.data["reason"]
    assert events(repo, "commit_created") == []


def test_tree_changes_lists_a_renamed_file_under_both_names(project: tuple[Path, str]) -> None:
    root, base = project
    run_git(root, "mv", "pytest.ini", "renamed.cfg")
    run_git(root, "commit", "-q", "-m", "rename")
    head = run_git(root, "rev-parse", "HEAD").strip()

    assert git.tree_changes(root, base, head) == ["pytest.ini", "renamed.cfg"]


@pytest.mark.parametrize("bad", ["HEAD", "--output=/tmp/x", "a" * 39])
def test_tree_changes_takes_only_full_shas(project: tuple[Path, str], bad: str) -> None:
    root, base = project
    with pytest.raises(GitError, match="not an object sha"):
        git.tree_changes(root, bad, base)
    with pytest.raises(GitError, match="not an object sha"):
        git.tree_changes(root, base, bad)
