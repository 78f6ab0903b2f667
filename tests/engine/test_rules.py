"""Issue 31, item 2: the loop's rules are one versioned block with a hash; every maker prompt
carries it, the hash is journaled per attempt, and an attempt whose prompt lacks it refuses to
start."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from support.cli import invoke
from support.journal import events
from support.repos import make_project, write_agent

from loopctl.definitions.skills import Skill
from loopctl.engine.prompts import MAX_PROMPT_BYTES, AttemptSummary, MakerContext, maker_prompt
from loopctl.engine.rules import RULES_VERSION, rules_block

TASK = "tests-green"
RULES = {
    "instructions": "Keep changes minimal.",
    "rules": ["Never edit tests."],
    "protected": ["tests/**"],
    "scope": ["src/**"],
}


def skill(folder: Path, name: str) -> Skill:
    path = folder / name / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(f"---\nname: {name}\ndescription: about {name}\n---\nDo {name}.\n")
    return Skill(name=name, description=f"about {name}", path=path)


def test_the_block_is_stable_and_its_hash_follows_every_part(tmp_path: Path) -> None:
    skills = [skill(tmp_path, "fix-ci"), skill(tmp_path, "release")]
    block = rules_block(**RULES, skills=skills)  # type: ignore[arg-type]

    assert block == rules_block(**RULES, skills=list(reversed(skills)))  # type: ignore[arg-type]
    assert block.version == RULES_VERSION
    assert re.fullmatch(r"[0-9a-f]{64}", block.sha256)
    assert block.marker == f"loopctl-rules v{RULES_VERSION} sha256:{block.sha256}"
    assert block.text.startswith(f"# Rules ({block.marker})\n")
    for part in ("Keep changes minimal.", "Never edit tests.", "tests/**", "src/**", "fix-ci"):
        assert part in block.body
    changed = [
        {**RULES, "instructions": "Keep changes small."},
        {**RULES, "rules": ["Never edit tests!"]},
        {**RULES, "protected": ["tests/**", "conftest.py"]},
        {**RULES, "scope": []},
    ]
    hashes = {rules_block(**c, skills=skills).sha256 for c in changed}  # type: ignore[arg-type]
    hashes.add(rules_block(**RULES).sha256)  # type: ignore[arg-type]  # no skills
    assert block.sha256 not in hashes
    assert len(hashes) == len(changed) + 1


def test_the_block_is_bounded_however_many_rules_and_skills(tmp_path: Path) -> None:
    many = [skill(tmp_path, f"skill-{n:03d}") for n in range(300)]
    block = rules_block(
        instructions="x" * 10_000, rules=["rule"] * 500, protected=(), scope=(), skills=many
    )
    assert len(block.body) <= 2500


def context(attempt: int, **overrides: object) -> MakerContext:
    values: dict[str, object] = {
        "task_id": "t",
        "task_prompt": "Fix add().",
        "goal": "tests green",
        "check": "pytest -q",
        **RULES,
        "skills": [],
        "full_skills": [],
        "attempts": [AttemptSummary(n, "failed", "E" * 900) for n in range(1, attempt)],
        "attempt_number": attempt,
    }
    values.update(overrides)
    return MakerContext(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize("attempt", [1, 2, 9])
def test_every_maker_prompt_carries_the_block_whole(attempt: int) -> None:
    ctx = context(attempt)
    block = ctx.rules_block()
    prompt = maker_prompt(ctx)
    assert block.carried_by(prompt)
    assert block == context(1).rules_block()  # the attempt does not change the rules


def test_a_prompt_cut_short_does_not_carry_the_block() -> None:
    ctx = context(1, goal="g" * 9000)  # pinned before the rules: the cap cuts them off
    assert not ctx.rules_block().carried_by(maker_prompt(ctx))


def test_a_prompt_cut_inside_the_block_does_not_carry_it() -> None:
    """The cap falls after the marker line but before the block's end: the marker alone is
    not the rules (the protected paths and the scope come after it)."""
    block = context(1).rules_block()
    probe = context(1, goal="g")
    before = maker_prompt(probe).index(block.text) - 1  # what precedes the block, goal "g"
    cut_at = before + len(f"# Rules ({block.marker})\n") + 20
    ctx = context(1, goal="g" * (MAX_PROMPT_BYTES - cut_at))
    prompt = maker_prompt(ctx)

    assert block.marker in prompt
    assert block.text not in prompt
    assert not block.carried_by(prompt)


def test_each_attempt_journals_the_hash_its_prompt_carries(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "never_fixes.py", agent_extra='developer_instructions = "Be brief."\n')

    result = invoke(monkeypatch, repo, "goal", "tests green")

    assert result.exit_code == 1, result.output
    notes = [e for e in events(repo, "note", TASK) if e.data.get("what") == "rules"]
    assert [n.data["attempt"] for n in notes] == [1, 2]
    (sha,) = {n.data["sha256"] for n in notes}
    for prompt in sorted((repo / ".loop" / "runs").rglob("maker-prompt.md")):
        assert f"loopctl-rules v{RULES_VERSION} sha256:{sha}" in prompt.read_text()


def test_an_attempt_whose_prompt_lacks_the_rules_refuses_to_start(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo)
    huge = "the sum is right " * 600  # ~10 kB of goal, pinned before the rules

    check = f"{sys.executable} -c 'raise SystemExit(1)'"
    result = invoke(monkeypatch, repo, "goal", huge, "--check", check)

    assert result.exit_code == 1, result.output
    assert events(repo, "agent_started") == []  # the maker never ran
    (finished,) = events(repo, "attempt_finished")
    assert finished.data["verdict"] == "failed"
    assert "lacks the loop's current rules (loopctl-rules v1 sha256:" in finished.data["reason"]
    inbox = (repo / ".loop" / "INBOX.md").read_text()
    assert "lacks the loop's current rules" in inbox


def test_a_checker_agents_prompt_carries_the_block_its_maker_was_given(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checker agent is a CLI that calls tools and compacts too: its prompt carries the same
    block, so each of the task's turns names the current rules hash."""
    make_project(
        repo, "fixer.py", config_extra="", agent_extra='developer_instructions = "Be brief."\n'
    )
    write_agent(repo, "judge", "judge.py")
    config = repo / ".loop" / "config.toml"
    config.write_text(
        config.read_text().replace('maker = "maker"', 'maker = "maker"\nchecker = "judge"')
    )

    result = invoke(monkeypatch, repo, "goal", "add really adds")

    assert result.exit_code == 0, result.output
    (note,) = [e for e in events(repo, "note", "add-really-adds") if e.data.get("what") == "rules"]
    marker = f"loopctl-rules v{RULES_VERSION} sha256:{note.data['sha256']}"
    (maker,) = (repo / ".loop" / "runs").rglob("maker-prompt.md")
    (checker,) = (repo / ".loop" / "runs").rglob("checker-prompt.md")
    assert marker in maker.read_text()
    assert marker in checker.read_text()
    assert "Be brief." in checker.read_text().split("# The rules the maker worked under")[1]
