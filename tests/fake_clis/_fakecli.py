"""Shared by the fake coding-agent CLIs: where they record their calls and find a scenario.

Each fake appends {argv, cwd, stdin, env} to $HOME/.fake-cli/<name>.calls.jsonl and reads its
scenario from $HOME/.fake-cli/<name>.json ({"mode": …}); the default mode fixes calc.py.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def home() -> Path:
    folder = Path(os.environ.get("HOME", "/nonexistent")) / ".fake-cli"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def scenario(name: str) -> dict[str, Any]:
    path = home() / f"{name}.json"
    if not path.exists():
        return {"mode": "fix"}
    value = json.loads(path.read_text())
    return value if isinstance(value, dict) else {"mode": "fix"}


def record(name: str, argv: list[str], stdin: str | None = None) -> None:
    entry = {"argv": argv, "cwd": os.getcwd(), "stdin": stdin, "env": dict(os.environ)}
    with (home() / f"{name}.calls.jsonl").open("a") as handle:
        handle.write(json.dumps(entry) + "\n")


def fix_calc() -> bool:
    calc = Path("calc.py")
    if not calc.exists():
        return False
    text = calc.read_text()
    calc.write_text(text.replace("return a - b", "return a + b"))
    return "return a - b" in text


def fail(message: str, code: int = 2) -> None:
    print(message, file=sys.stderr)
    raise SystemExit(code)


def take(args: list[str], index: int, flag: str) -> str:
    if index + 1 >= len(args):
        fail(f"error: option '{flag}' argument missing")
    return args[index + 1]
