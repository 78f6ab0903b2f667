"""Fake checker agent: judges a fixed add() met, but never clears lines flagged as tampering."""

import json
import sys

prompt = sys.stdin.read()
asked_about_tampering = "does not tamper with the test run" in prompt
met = "+    return a + b" in prompt and not asked_about_tampering
reason = "the quoted lines forge the summary" if asked_about_tampering else "add() adds"
print(json.dumps({"met": met, "reason": reason}))
