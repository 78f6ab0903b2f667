"""Fake maker that asks a human which way to fix add(), then fixes it as answered.

argv[1]: a file where each prompt it gets is appended (outside the worktree), for the test.
Without an answer in its prompt it ends with `{"escalate": "…"}` (the agent protocol).
"""

import json
import sys
from pathlib import Path

prompt = sys.stdin.read()
with open(sys.argv[1], "a", encoding="utf-8") as seen:
    seen.write(prompt + "\n=====\n")
answers = [ln.removeprefix("Answer: ") for ln in prompt.splitlines() if ln.startswith("Answer: ")]
answer = answers[0] if answers else None
if answer is None:
    question = "Should add() return a + b, or is a - b intended?"
    print(json.dumps({"type": "result", "result": "need a decision", "escalate": question}))
    raise SystemExit(0)
if "a + b" in answer:
    calc = Path("calc.py")
    calc.write_text(calc.read_text().replace("a - b", "a + b"))
print(json.dumps({"type": "result", "result": f"did as told: {answer}", "is_error": False}))
