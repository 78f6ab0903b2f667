"""Fake checker agent: judges the condition met when the diff it is shown fixes add()."""

import json
import os
import sys

prompt = sys.stdin.read()
met = "+    return a + b" in prompt
reason = "the diff fixes add()" if met else "add() still subtracts"
print(f"role={os.environ.get('LOOPCTL_ROLE')}")
print(json.dumps({"met": met, "reason": reason}))
