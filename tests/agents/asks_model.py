"""Fake maker that asks a model (Anthropic Messages, plain HTTP) what to write into calc.py.

argv: the model's base URL. Its prompt (stdin) is the user message; the answer's text becomes
calc.py, when the model answered at all. A real HTTP client through loopctl's egress proxy:
the wire an offline replay records and plays back (issue 31, item 5).
"""

import json
import sys
import urllib.error
import urllib.request
from pathlib import Path

prompt = sys.stdin.read()
body = json.dumps(
    {
        "model": "claude-test",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": prompt}],
        "metadata": {"user_id": "session-that-changes-each-run"},
    }
).encode()
request = urllib.request.Request(
    sys.argv[1].rstrip("/") + "/v1/messages",
    data=body,
    headers={"content-type": "application/json", "x-api-key": "not-a-real-key"},
)
try:
    with urllib.request.urlopen(request, timeout=60) as answer:
        reply = json.loads(answer.read())
except urllib.error.HTTPError as exc:
    print(json.dumps({"type": "result", "result": f"model said {exc.code}", "is_error": True}))
    sys.exit(1)
text = "".join(block.get("text", "") for block in reply.get("content", []))
if text:
    Path("calc.py").write_text(text)
usage = reply.get("usage", {})
print(
    json.dumps(
        {
            "type": "result",
            "result": "asked the model",
            "is_error": False,
            "usage": {
                "input_tokens": usage.get("input_tokens", 0),
                "output_tokens": usage.get("output_tokens", 0),
            },
        }
    )
)
