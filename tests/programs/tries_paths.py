"""Run inside the sandbox: try to write, read and list the paths it is given; print what worked.

Usage: tries_paths.py SPEC, SPEC a JSON object with optional lists `write` (append a line to
each file, or create it), `remove` (unlink each file), `read` (read each file's text, or every
file's in a folder) and `exists`. Prints one JSON object: {"write": {path: "written" |
strerror}, "remove": {path: "removed" | strerror}, "read": {path: text | strerror}, "exists":
{path: bool}}.
"""

import json
import os
import sys

spec = json.loads(sys.argv[1])
out: dict[str, dict[str, object]] = {"write": {}, "remove": {}, "read": {}, "exists": {}}
for path in spec.get("write", []):
    try:
        with open(path, "a", encoding="utf-8") as opened:
            opened.write("written by the agent\n")
        out["write"][path] = "written"
    except OSError as exc:
        out["write"][path] = exc.strerror or str(exc)
for path in spec.get("remove", []):
    try:
        os.unlink(path)
        out["remove"][path] = "removed"
    except OSError as exc:
        out["remove"][path] = exc.strerror or str(exc)
for path in spec.get("read", []):
    try:
        if os.path.isdir(path):
            text = ""
            for folder, _subdirs, files in os.walk(path):
                for name in files:
                    with open(os.path.join(folder, name), encoding="utf-8") as opened:
                        text += opened.read()
        else:
            with open(path, encoding="utf-8") as opened:
                text = opened.read()
        out["read"][path] = text
    except OSError as exc:
        out["read"][path] = exc.strerror or str(exc)
for path in spec.get("exists", []):
    out["exists"][path] = os.path.lexists(path)
print(json.dumps(out))
