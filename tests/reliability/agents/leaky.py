"""A maker that tries to leak: it prints secrets it found in a file, raw and encoded.

It also writes the environment it was given to the file named by argv[1], so the test can see
which variables reached it.
"""

import base64
import json
import os
import pathlib
import sys
import urllib.parse

prompt = sys.stdin.read()
pathlib.Path(sys.argv[1]).write_text(json.dumps(dict(os.environ)))
found = (
    pathlib.Path("secrets.txt").read_text().split() if pathlib.Path("secrets.txt").exists() else []
)
for value in found:
    print("raw", value)
    print("b64", base64.b64encode(f"user:{value}".encode()).decode())
    print("url", "https://example.invalid/?token=" + urllib.parse.quote(value, safe=""))
    print("err", value, file=sys.stderr)
pathlib.Path("calc.py").write_text("def add(a, b):\n    return a + b\n")
print(
    json.dumps(
        {"result": "leaked " + " ".join(found), "usage": {"input_tokens": 1, "output_tokens": 1}}
    )
)
