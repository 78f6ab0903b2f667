"""What a proposal may change and how a proposal file reads (loopctl.definitions.proposals):
pure table tests; the end-to-end behaviour is tests/engine/test_proposals.py."""

from __future__ import annotations

import pytest

from loopctl.definitions.proposals import (
    definitions_digest,
    holds_definitions,
    is_definition,
    patch_problems,
    paths_of,
    read_proposal_file,
    tree_problems,
)

GOOD = "--- a/.loop/config.toml\n+++ b/.loop/config.toml\n@@ -1 +1 @@\n-a\n+b\n"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (".loop/config.toml", True),
        (".loop/loops/ci.toml", True),
        (".loop/agents/maker.toml", True),
        ("agents/maker.toml", True),
        ("agents/planner.py", False),  # a project's own `agents` package is not loopctl's
        (".loop/loops/notes.txt", False),
        (".claude/agents/x.md", True),
        (".codex/agents/x.toml", True),
        ("skills/fix/SKILL.md", True),
        (".agents/skills/fix/SKILL.md", True),
        (".loop/log/events.jsonl", False),
        (".loop/STATE.md", False),
        (".loop/.gitignore", False),
        ("calc.py", False),
        (".git/config", False),
    ],
)
def test_which_files_are_definitions(path: str, expected: bool) -> None:
    assert is_definition(path) is expected


@pytest.mark.parametrize(
    ("diff", "problem"),
    [
        (GOOD, None),
        ("--- a/../x\n+++ b/../x\n", "leaves its folder"),
        ("--- a/.loop/../calc.py\n+++ b/.loop/../calc.py\n", "leaves its folder"),
        ("--- /dev/null\n+++ b//etc/passwd\n", "absolute"),
        ("--- a/src/x.py\n+++ b/src/x.py\n", "not a definition file"),
        ('--- "a/.loop/con\\146ig.toml"\n+++ "b/.loop/con\\146ig.toml"\n', "not a plain path"),
        ("--- a/skills/.git/config\n+++ b/skills/.git/config\n", "inside .git"),
        ("new file mode 120000\n--- /dev/null\n+++ b/skills/x/SKILL.md\n", "symbolic link"),
        ("new file mode 160000\n--- /dev/null\n+++ b/skills/x/SKILL.md\n", "mode 160000"),
        ("--- a/skills/x/SKILL.md\n+++ b/skills/x/SKILL.md\nGIT binary patch\n", "binary"),
        ("rename from .loop/config.toml\nrename to calc.py\n" + GOOD, "not a definition file"),
        ("just prose, no diff\n", "not a unified diff"),
    ],
)
def test_patch_problems(diff: str, problem: str | None) -> None:
    found = patch_problems(diff)
    if problem is None:
        assert found == []
    else:
        assert any(problem in p for p in found), found


def test_a_proposal_file_is_prose_then_a_fenced_diff() -> None:
    text = f"# Loosen the budget\n\nThe tasks need more turns.\n\n```diff\n{GOOD}```\n\nThanks.\n"

    read = read_proposal_file("budget.md", text)

    assert read.diff == GOOD
    assert read.rationale == "# Loosen the budget\n\nThe tasks need more turns.\n\n\nThanks."
    assert paths_of(read.diff) == [".loop/config.toml"]


def test_a_proposal_file_may_be_a_bare_diff() -> None:
    assert read_proposal_file("x.md", "why\n" + GOOD).diff == GOOD


@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        ("../x.md", GOOD, "slug"),
        ("X.md", GOOD, "slug"),
        ("x.txt", GOOD, "slug"),
        ("x.md", "no diff here\n", "no diff"),
        ("x.md", "```diff\n```\n", "empty"),
    ],
)
def test_what_is_no_proposal_file(name: str, text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        read_proposal_file(name, text)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        *[(".loop/loops", True), ("agents", True), (".claude/agents", True), ("skills/x", True)],
        *[(".claude", False), ("src", False), (".loop/loops/x", False)],
    ],
)
def test_which_paths_hold_definition_folders(path: str, expected: bool) -> None:
    assert holds_definitions(path) is expected


def test_a_link_over_dot_loop_holds_the_loops_own_definitions() -> None:
    assert holds_definitions(".loop", [".loop/**"])


def test_tree_problems_hold_the_applied_change_to_plain_definition_files() -> None:
    assert tree_problems([(".loop/config.toml", "100644"), ("agents/a.toml", "")]) == []
    (link,) = tree_problems([(".loop/loops/l.toml", "120000")])
    assert "symbolic link" in link
    (outside,) = tree_problems([("calc.py", "100644")])
    assert "not a definition file" in outside


def test_the_definitions_digest_is_order_free_and_content_bound() -> None:
    one = [("100644", "a" * 40, ".loop/config.toml"), ("100644", "b" * 40, "agents/m.toml")]
    assert definitions_digest(one) == definitions_digest(list(reversed(one)))
    assert definitions_digest(one) != definitions_digest([one[0], ("100644", "c" * 40, one[1][2])])
