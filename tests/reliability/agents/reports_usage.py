"""Maker that fixes calc.py and reports usage numbers no real agent would.

Usage: reports_usage.py LITERAL
LITERAL is written as is, as JSON text, for every token count and the cost: `1e999`,
`Infinity`, `NaN`, `-5`, a 400-digit integer. `deep` instead ends with a JSON line nested
200,000 levels deep.
"""

import sys
from pathlib import Path

literal = sys.argv[1]
sys.stdin.read()
calc = Path("calc.py")
calc.write_text(calc.read_text().replace("a - b", "a + b"))
if literal == "deep":
    print('{"usage": ' + "[" * 200_000 + "]" * 200_000 + "}")
    raise SystemExit(0)
usage = f'{{"input_tokens": {literal}, "output_tokens": {literal}}}'
print(f'{{"type": "result", "result": "fixed", "usage": {usage}, "total_cost_usd": {literal}}}')
