"""The guide's first steps run as written: "Getting started" with no agent CLI (a `command`
agent), then "From a goal to main" merges the result (issue 29: a newcomer follows only the
guide to a first fix merged into `main`).

The commands, the agent file and the config line come from the pages themselves; only the
project (a failing test) and the agent's script (its work) are the test's own.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from support.guide import page
from support.repos import commit_all, git, make_repo

FIXER = """import pathlib, sys

prompt = pathlib.Path(sys.argv[1]).read_text()  # {prompt_file}: the task, the goal, the rules
calc = pathlib.Path("calc.py")
calc.write_text(calc.read_text().replace("a - b", "a + b"))
print('{"result": "add() adds now"}')
"""


def section(text: str, heading: str) -> str:
    """The text under `## heading`, up to the next heading of any level (not a `#` comment in
    a code block)."""
    lines = text[text.index(f"\n## {heading}\n") + 1 :].splitlines(keepends=True)
    taken, fenced = [lines[0]], False
    for line in lines[1:]:
        fenced ^= line.startswith("```")
        if not fenced and re.match(r"#{1,6} ", line):
            break
        taken.append(line)
    return "".join(taken)


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.DOTALL | re.MULTILINE)


def commands(text: str) -> list[str]:
    return [
        line[2:]
        for block in blocks(text, "console")
        for line in block.splitlines()
        if line.startswith("$ ")
    ]


def shell(repo: Path, line: str) -> subprocess.CompletedProcess[str]:
    # As a reader types it: a shell, the `loopctl` of this install first on PATH.
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        ["bash", "-c", line],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )


def test_a_command_agent_fixes_a_test_and_the_fix_is_merged_into_main(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "your-repo")
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    (repo / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (repo / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    (repo / "tools").mkdir()
    (repo / "tools" / "fixer.py").write_text(FIXER)
    commit_all(repo, "calc, whose add() subtracts")
    start = page("getting-started.md")
    assert shell(repo, "loopctl init").returncode == 0  # the first command of the section before

    steps = section(start, "Your repository, with no agent CLI: a `command` agent")
    agent, config = blocks(steps, "toml")
    assert agent.startswith("# .loop/agents/fixer.toml\n")
    (repo / ".loop" / "agents" / "fixer.toml").write_text(agent)
    assert config.startswith("# .loop/config.toml, [defaults]\n")
    line = config.splitlines()[1]
    settings = repo / ".loop" / "config.toml"
    settings.write_text(re.sub(r"(?m)^maker = .*$", line, settings.read_text(), count=1))
    commit_all(repo, "loopctl, with my own agent")
    ran = []
    for command in commands(steps):
        done = shell(repo, command)
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        ran.append(command)
    assert "next: git merge loop/goal/tests-green" in done.stdout

    merge = section(page("delivery.md"), "Merge by hand")
    for command in commands(merge):
        if command in ran:
            continue  # the goal ran above; once is enough
        done = shell(repo, command)
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"

    assert "a + b" in (repo / "calc.py").read_text()
    assert git(repo, "rev-parse", "main") == git(repo, "rev-parse", "loop/goal/tests-green")
    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert tested.returncode == 0, tested.stdout
