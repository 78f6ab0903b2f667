"""Fake maker that records what it was given: env, argv, stdin, cwd -> env.json; env on stdout."""

import json
import os
import sys
from pathlib import Path

stdin = sys.stdin.read()
record = {"env": dict(os.environ), "argv": sys.argv, "stdin": stdin, "cwd": os.getcwd()}
Path("env.json").write_text(json.dumps(record))
print(json.dumps(dict(os.environ)))
