"""A maker for the crash tests: writes work/<task>.txt, finishing it only on its second attempt."""

import json
import os
import pathlib
import sys

sys.stdin.read()
task = os.environ["LOOPCTL_TASK"]
attempt = int(os.environ["LOOPCTL_ATTEMPT"])
target = pathlib.Path("work") / f"{task}.txt"
target.parent.mkdir(exist_ok=True)
target.write_text("done" if attempt >= 2 else "draft")
usage = {"input_tokens": 100 * attempt, "output_tokens": 10}
print(json.dumps({"result": f"wrote {target}", "usage": usage, "total_cost_usd": 0.001}))
