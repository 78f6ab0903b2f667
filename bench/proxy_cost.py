"""The egress proxy's cost (issue 25): per request on loopback, and per sandboxed start.

Run: python bench/proxy_cost.py
Goals: at most 5 ms added per request, at most 30 ms added per agent start. Both sides are
measured in the same run:
- a request: the same client program GETs a local HTTP server N times, once on the host
  (direct) and once inside a proxied sandbox, through the bridge and the proxy (the server's
  mirror port, and HTTP_PROXY's absolute form), a new connection each time (as the proxy makes
  one per request); the medians are compared;
- a start: `process.run` of `python -S -c pass` in a sandbox with its own network namespace and
  nothing out (`none`: no bridge, no proxy), and in one in proxy mode (the proxy serving, the
  bridge in front of the program).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results import Row, print_rows

CLIENT = """
import http.client, json, statistics, sys, time
port, runs, proxy = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "proxy"
took = []
for _ in range(runs):
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", 47000 if proxy else port, timeout=30)
    conn.request("GET", f"http://127.0.0.1:{port}/" if proxy else "/")
    assert conn.getresponse().read() == b"ok"
    conn.close()
    took.append(time.perf_counter() - start)
print(json.dumps(statistics.median(took)))
"""


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


def requests(runs: int) -> tuple[float, float, float]:
    """Median seconds per request: direct, through the mirror port, through HTTP_PROXY."""
    from loopctl import process, sandbox
    from loopctl.egress import EgressPolicy, HostPort

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = int(server.server_address[1])
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    try:
        with tempfile.TemporaryDirectory(prefix="loopctl-bench-") as tmp:
            root = Path(tmp)
            policy = EgressPolicy(hosts=(HostPort("127.0.0.1", port),))
            box = sandbox.make_sandbox(root=root, worktree=root, egress=policy)
            found = []
            for how, with_box in (("direct", None), ("mirror", box), ("proxy", box)):
                argv = [sys.executable, "-S", "-c", CLIENT, str(port), str(runs), how]
                done = process.run(argv, cwd=root, env=env, timeout=300, sandbox=with_box)
                assert done.ok, done.output_tail()
                found.append(float(json.loads(done.stdout_tail.strip().splitlines()[-1])))
    finally:
        server.shutdown()
        server.server_close()
    return found[0], found[1], found[2]


def starts(runs: int) -> tuple[float, float]:
    """Median seconds to run a trivial program sandboxed: no bridge (`none`), and proxied."""
    from loopctl import limits, process, sandbox
    from loopctl.egress import EgressPolicy, NetworkMode

    with tempfile.TemporaryDirectory(prefix="loopctl-bench-") as tmp:
        root = Path(tmp)
        boxes = [
            sandbox.make_sandbox(
                root=root, worktree=root, limits=limits.Limits(), egress=EgressPolicy(mode=mode)
            )
            for mode in (NetworkMode.NONE, NetworkMode.PROXY)
        ]
        env = dict(os.environ)
        argv = [sys.executable, "-S", "-c", "pass"]
        samples: list[list[float]] = [[], []]
        for _ in range(runs):
            for sample, box in zip(samples, boxes, strict=True):
                start = time.perf_counter()
                done = process.run(argv, cwd=root, env=env, timeout=60, sandbox=box)
                sample.append(time.perf_counter() - start)
                assert done.ok, done.output_tail()
    return statistics.median(samples[0]), statistics.median(samples[1])


def measure(runs: int = 30, requests_per_run: int = 200) -> list[Row]:
    direct, mirror, proxied = requests(requests_per_run)
    bare, bridged = starts(runs)
    rows = []
    for name, value in (("its mirror port", mirror), ("HTTP_PROXY", proxied)):
        added = (value - direct) * 1000
        rows.append(
            Row(
                f"egress: one request on loopback through {name}",
                value * 1000,
                "ms",
                baseline=direct * 1000,
                goal="+<= 5 ms",
                met=added <= 5,
                note=f"{added:.2f} ms added (median of {requests_per_run}, a connection each)",
            )
        )
    added = (bridged - bare) * 1000
    rows.append(
        Row(
            "egress: one sandboxed start, proxy and bridge vs own namespace only",
            bridged * 1000,
            "ms",
            baseline=bare * 1000,
            goal="+<= 30 ms",
            met=added <= 30,
            note=f"{added:.1f} ms added (median of {runs})",
        )
    )
    return rows


if __name__ == "__main__":
    print_rows(measure())
