"""loopctl's bundled demo agent — a scripted program, not a language model.

It is honest about what it is: it runs the test command it is given, and if tests fail it tries
one kind of repair, swapping a binary operator in a `return` line of a non-test Python file,
keeping the first swap that makes the tests pass. Real work needs a real agent (`loopctl init`
writes definitions for Claude Code, Codex, opencode, aider and goose). It speaks loopctl's agent
protocol: prompt on stdin, a JSON result on its last line.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

SWAPS = {"+": "-", "-": "+", "*": "/", "/": "*", "<": ">", ">": "<", "==": "!=", "!=": "=="}
_RETURN_OP = re.compile(r"^(\s*return\s+\S+\s*)(==|!=|[-+*/<>])(\s*\S+.*)$")


def tests_pass(test_argv: list[str], cwd: Path) -> bool:
    done = subprocess.run(test_argv, cwd=cwd, capture_output=True, text=True, timeout=300)
    return done.returncode == 0


def candidates(root: Path) -> list[Path]:
    files = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if (
            relative.startswith((".", "tests/"))
            or "/test" in relative
            or path.name.startswith("test")
        ):
            continue
        files.append(path)
    return files


def repair(root: Path, test_argv: list[str]) -> str:
    if tests_pass(test_argv, root):
        return "The tests already pass; nothing to change."
    for path in candidates(root):
        original = path.read_text(encoding="utf-8")
        lines = original.splitlines(keepends=True)
        for index, line in enumerate(lines):
            match = _RETURN_OP.match(line.rstrip("\n"))
            if not match:
                continue
            swapped = match.group(1) + SWAPS[match.group(2)] + match.group(3) + "\n"
            trial = [*lines[:index], swapped, *lines[index + 1 :]]
            path.write_text("".join(trial), encoding="utf-8")
            if tests_pass(test_argv, root):
                rel = path.relative_to(root)
                return f"Fixed {rel} line {index + 1}: `{line.strip()}` -> `{swapped.strip()}`."
            path.write_text(original, encoding="utf-8")
    return "I only know how to swap operators in return lines, and no swap made the tests pass."


def main() -> int:
    sys.stdin.read()  # the prompt; this scripted agent does not need to read it
    root = Path(os.environ.get("LOOPCTL_WORKTREE", "."))
    test_argv = sys.argv[1:]
    if not test_argv:
        # No default runner: pytest is not among loopctl's dependencies.
        print("usage: python -m loopctl.commands.demo_agent TEST-COMMAND [ARG...]", file=sys.stderr)
        return 2
    summary = repair(root, test_argv)
    print(summary)
    result = {
        "type": "result",
        "result": summary,
        "is_error": False,
        "usage": {"input_tokens": 0, "output_tokens": 0},
        "total_cost_usd": 0.0,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
