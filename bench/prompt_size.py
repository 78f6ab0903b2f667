"""Size of the maker's prompt as skills and earlier attempts pile up.

Run: python bench/prompt_size.py
Builds a task with 50 installed skills (3 of them chosen by the loop, so given in full) and
feeds it 0..100 earlier attempts with long check output. Goal: flat in the number of attempts,
at most 8 KB.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from loopctl.definitions.skills import Skill
from loopctl.engine.prompts import MAX_PROMPT_BYTES, AttemptSummary, MakerContext, maker_prompt


def make_skills(folder: Path, count: int) -> list[Skill]:
    skills = []
    for index in range(count):
        name = f"skill-{index:02d}"
        path = folder / name / "SKILL.md"
        path.parent.mkdir(parents=True)
        description = f"Skill number {index}: " + "does a useful thing when asked. " * 8
        body = "\n".join(f"Step {n}: do the careful thing number {n}." for n in range(120))
        path.write_text(f"---\nname: {name}\ndescription: '{description}'\n---\n{body}\n")
        skills.append(Skill(name=name, description=description, path=path))
    return skills


def attempts(count: int) -> list[AttemptSummary]:
    output = "\n".join(f"E   AssertionError: value {n} differs" for n in range(200))
    return [
        AttemptSummary(
            n, "failed", f"check `pytest -q` exited 1: failing test_{n % 7}", f"fp{n:08x}", output
        )
        for n in range(1, count + 1)
    ]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        skills = make_skills(Path(tmp), 50)
        print(f"limit {MAX_PROMPT_BYTES} bytes; 50 skills installed, 3 given in full")
        print("attempts  prompt bytes")
        for count in (0, 1, 2, 5, 10, 25, 50, 100):
            ctx = MakerContext(
                task_id="pr-42",
                task_prompt="Make the checks of PR #42 (Fix the parser) pass. " * 10,
                goal="tests green",
                check="pytest -q",
                instructions="Keep changes minimal. Never edit tests. " * 10,
                rules=["Never weaken a test.", "Keep the diff small."],
                protected=["tests/**", "conftest.py", "pyproject.toml"],
                scope=[],
                skills=skills,
                full_skills=skills[:3],
                attempts=attempts(count),
                attempt_number=count + 1,
            )
            size = len(maker_prompt(ctx).encode("utf-8"))
            print(f"{count:8d}  {size:12d}")


if __name__ == "__main__":
    main()
