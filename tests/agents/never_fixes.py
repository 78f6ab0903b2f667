"""Fake maker that works hard at nothing: writes a notes file, fixes nothing, exits 0.

Optional: `--tokens N` (split 5:1 into input/output) and `--cost USD` to report usage.
"""

import argparse
import json
import sys
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--tokens", type=int, default=0)
parser.add_argument("--cost", type=float, default=None)
args = parser.parse_args()
sys.stdin.read()
Path("notes.txt").write_text("I looked at calc.py and changed nothing.\n")
result = {
    "type": "result",
    "result": "wrote notes.txt",
    "is_error": False,
    "usage": {
        "input_tokens": args.tokens * 5 // 6,
        "output_tokens": args.tokens - args.tokens * 5 // 6,
    },
}
if args.cost is not None:
    result["total_cost_usd"] = args.cost
print(json.dumps(result))
