"""Only the model gets out (issue 25): a hostile agent in its own network namespace, behind
loopctl's egress proxy, as root and as an ordinary user.

Real sandboxes, real sockets, real servers on the host's loopback: the agent
(agents/probes_network.py) cannot reach a host listener, an abstract unix socket or an unlisted
host (the proxy answers 403 and records it); it reaches an allowed local server through its
mirror port and through HTTP_PROXY, and the server sees the real key while the agent holds only
the stand-in; the stand-in sent anywhere else, pipelined or not, stays the stand-in; a route
speaks TLS upstream with the real key; `none` reaches nothing, `open` the host; exit codes and
signals pass through the bridge.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from support.accounts import as_user, give_to, unprivileged_python

from loopctl import process, sandbox
from loopctl.egress import PROXY_PORT, ROUTE_PORT, EgressPolicy, NetworkMode

PY = sys.executable
DRIVER = Path(__file__).parents[1] / "programs" / "egress_driver.py"
BRIDGE = sandbox.EGRESS_BRIDGE
REAL_KEY = "sk-real-" + "7" * 24

pytestmark = pytest.mark.skipif(
    sandbox.probe()[0] != "bwrap", reason=f"no bwrap sandbox here: {sandbox.probe()[2]}"
)


class Recorder(ThreadingHTTPServer):
    """A local HTTP(S) server that keeps every request's path and headers."""

    daemon_threads = True

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.seen: list[dict[str, object]] = []
        super().__init__(("127.0.0.1", 0), _Handler)
        if tls is not None:
            self.socket = tls.wrap_socket(self.socket, server_side=True)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.server_address[1])


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        assert isinstance(self.server, Recorder)
        self.server.seen.append({"path": self.path, "headers": dict(self.headers.items())})
        body = b"served " + self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def base() -> Iterator[Path]:
    # Not pytest's tmp_path: an unprivileged user must be able to enter it.
    folder = Path(tempfile.mkdtemp(prefix="loopctl-egress-test-"))
    folder.chmod(0o755)
    (folder / "work").mkdir()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def servers() -> Iterator[tuple[Recorder, Recorder]]:
    model, other = Recorder(), Recorder()
    yield model, other
    for server in (model, other):
        server.shutdown()
        server.server_close()


@pytest.fixture
def host_listener() -> Iterator[socket.socket]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    yield listener
    listener.close()


@pytest.fixture
def abstract_listener() -> Iterator[str]:
    name = f"loopctl-test-{secrets.token_hex(6)}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + name)
    listener.listen(8)
    yield name
    listener.close()


def account(user: str | None) -> tuple[str, dict[str, str]]:
    """The interpreter and extra environment that run the driver as `user` (None: as we are)."""
    if user is None:
        return PY, {}
    runtime = unprivileged_python()
    if runtime is None:
        pytest.skip("needs root and an interpreter the account `nobody` can run")
    python, path = runtime
    return python, ({"PYTHONPATH": path} if path else {})


def drive(base: Path, spec: dict[str, object], user: str | None = None) -> dict[str, object]:
    python, extra = account(user)
    if user is not None:
        give_to(user, base)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", **extra}
    env.update({k: v for k, v in os.environ.items() if k == "SSL_CERT_FILE"})
    full = {"worktree": str(base / "work"), "env": {}, **spec}
    done = subprocess.run(
        [python, str(DRIVER), json.dumps(full)],
        cwd=base, env=env, capture_output=True, text=True, timeout=300, check=False,
        **as_user(user),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["exit"] == 0, report
    report["steps"] = json.loads(str(report["stdout"]).strip().splitlines()[-1])
    return report


def headers_seen(server: Recorder) -> list[str]:
    return [json.dumps(request["headers"]) for request in server.seen]


@pytest.mark.parametrize("user", [None, "nobody"], ids=["as-root-or-self", "as-nobody"])
def test_only_allowed_hosts_are_reached_and_only_they_get_the_real_key(
    base: Path,
    servers: tuple[Recorder, Recorder],
    host_listener: socket.socket,
    abstract_listener: str,
    user: str | None,
) -> None:
    model, other = servers
    forbidden = host_listener.getsockname()[1]
    key_header = {"Authorization": "Bearer $MODEL_API_KEY"}
    pipelined = (
        f"GET http://127.0.0.1:{other.port}/first HTTP/1.1\r\nHost: x\r\n"
        "Authorization: Bearer $MODEL_API_KEY\r\n\r\n"
        f"GET http://127.0.0.1:{model.port}/second HTTP/1.1\r\nHost: x\r\n"
        "Authorization: Bearer $MODEL_API_KEY\r\n\r\n"
    )
    smuggled = (
        f"GET /mirror-first HTTP/1.1\r\nHost: 127.0.0.1:{other.port}\r\n"
        "Content-Length: 0\r\n\r\n"
        f"GET http://127.0.0.1:{model.port}/smuggled HTTP/1.1\r\n"
        "Authorization: Bearer $MODEL_API_KEY\r\n\r\n"
    )
    steps = [
        {"env": "MODEL_API_KEY"},
        {"tcp": ["127.0.0.1", forbidden]},
        {"abstract": abstract_listener},
        {"proxied": f"http://127.0.0.1:{forbidden}/", "headers": key_header},
        {"connect": "unlisted.example:443"},
        {"get": f"http://127.0.0.1:{model.port}/mirror", "headers": key_header},
        {"proxied": f"http://127.0.0.1:{model.port}/proxied", "headers": key_header},
        {"get": f"http://127.0.0.1:{other.port}/elsewhere", "headers": key_header},
        {"raw": [PROXY_PORT, pipelined]},
        {"raw": [other.port, smuggled]},
    ]
    report = drive(
        base,
        {
            "hosts": [f"127.0.0.1:{model.port}", f"127.0.0.1:{other.port}"],
            "secrets": [["MODEL_API_KEY", REAL_KEY, [f"127.0.0.1:{model.port}"]]],
            "env": {"MODEL_API_KEY": REAL_KEY},
            "steps": steps,
        },
        user,
    )
    seen = report["steps"]
    assert isinstance(seen, list)
    env, tcp, abstract, refused, connect, mirror, proxied, elsewhere, piped, _ = seen
    stand_in = env["env"]
    assert stand_in != REAL_KEY
    assert stand_in.startswith("loopctl-stand-in-")
    assert env["proc"] == stand_in  # /proc/self/environ holds the stand-in too
    assert REAL_KEY not in json.dumps(seen) + str(report["stderr"])
    # (a) nothing of the host: its loopback listener, an abstract socket, an unlisted host.
    assert tcp.startswith("error"), tcp
    assert abstract.startswith("error"), abstract
    assert refused["status"] == 403
    assert connect.split(" ")[1] == "403", connect
    assert report["refused"] == [f"127.0.0.1:{forbidden}", "unlisted.example:443"]
    # (b) the allowed local model server, through its mirror port and through the proxy: it
    # sees the real key.
    assert mirror == {"status": 200, "body": "served /mirror"}
    assert proxied == {"status": 200, "body": "served /proxied"}
    by_path = {str(r["path"]): r["headers"] for r in model.seen}
    assert by_path["/mirror"]["Authorization"] == f"Bearer {REAL_KEY}"  # type: ignore[index]
    assert by_path["/proxied"]["Authorization"] == f"Bearer {REAL_KEY}"  # type: ignore[index]
    # (c) another allowed host the key is not for gets the stand-in, never the real value.
    assert elsewhere["status"] == 200
    # (f) a second request pipelined behind the first is never forwarded unparsed: only the
    # first is answered, and the host the key is not for never sees the real key.
    assert piped.count("HTTP/1.") == 1, piped
    assert "served /first" in piped
    assert "/second" not in by_path
    assert "/smuggled" not in by_path
    assert REAL_KEY not in "".join(headers_seen(other))
    assert all(stand_in in h for h in headers_seen(other) if "Authorization" in h)
    assert {str(r["path"]) for r in other.seen} == {"/elsewhere", "/first", "/mirror-first"}


def make_tls(folder: Path) -> tuple[Path, ssl.SSLContext]:
    """A throwaway certificate authority and a certificate for localhost, made with openssl."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.pem", "-days", "2", "-subj", "/CN=loopctl test CA")  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
            "server.csr", "-subj", "/CN=localhost")  # fmt: skip
    (folder / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.pem", "-days", "2",
            "-extfile", "san.ext")  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder / "server.pem", folder / "server.key")
    return folder / "ca.pem", context


@pytest.mark.parametrize("user", [None, "nobody"], ids=["as-root-or-self", "as-nobody"])
def test_a_route_speaks_tls_upstream_with_the_real_key(
    base: Path, monkeypatch: pytest.MonkeyPatch, user: str | None
) -> None:
    (base / "tls").mkdir()
    ca, context = make_tls(base / "tls")
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    upstream = Recorder(tls=context)
    try:
        steps = [
            {"env": "ANTHROPIC_BASE_URL"},
            {"get": "$ANTHROPIC_BASE_URL/messages", "headers": {"x-api-key": "$ANTHROPIC_API_KEY"}},
        ]
        report = drive(
            base,
            {
                "routes": [["ANTHROPIC_BASE_URL", f"https://localhost:{upstream.port}/v1"]],
                "secrets": [["ANTHROPIC_API_KEY", REAL_KEY, [f"localhost:{upstream.port}"]]],
                "env": {"ANTHROPIC_API_KEY": REAL_KEY},
                "steps": [steps[0]],
            },
            user,
        )
        inner_url = report["steps"][0]["env"]  # type: ignore[index]
        assert inner_url == f"http://127.0.0.1:{ROUTE_PORT}/v1"
        report = drive(
            base,
            {
                "routes": [["ANTHROPIC_BASE_URL", f"https://localhost:{upstream.port}/v1"]],
                "secrets": [["ANTHROPIC_API_KEY", REAL_KEY, [f"localhost:{upstream.port}"]]],
                "env": {"ANTHROPIC_API_KEY": REAL_KEY},
                "steps": [{"get": f"{inner_url}/messages", "headers": steps[1]["headers"]}],
            },
            user,
        )
        assert report["steps"] == [{"status": 200, "body": "served /v1/messages"}]
        (request,) = upstream.seen
        headers = request["headers"]
        assert isinstance(headers, dict)
        assert headers["x-api-key"] == REAL_KEY
        assert headers["Host"] == f"localhost:{upstream.port}"
        assert headers["Connection"] == "close"
    finally:
        upstream.shutdown()
        upstream.server_close()


def test_none_reaches_nothing_and_open_reaches_the_host(
    base: Path, host_listener: socket.socket
) -> None:
    port = host_listener.getsockname()[1]
    steps = [
        {"tcp": ["127.0.0.1", port]},
        {"tcp": ["127.0.0.1", PROXY_PORT]},
        {"env": "HTTP_PROXY"},
    ]
    closed = drive(base, {"mode": "none", "steps": steps})
    tcp, proxy, env = closed["steps"]  # type: ignore[misc]
    assert tcp.startswith("error")
    assert proxy.startswith("error")
    assert env == {"env": None, "proc": None}
    opened = drive(base, {"mode": "open", "steps": steps[:1]})
    assert opened["steps"] == ["ok"]


def run_exit(base: Path, code: str, mode: NetworkMode) -> process.Completed:
    worktree = base / "work"
    box = sandbox.make_sandbox(root=worktree, worktree=worktree, egress=EgressPolicy(mode=mode))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    return process.run([PY, "-c", code], cwd=worktree, env=env, timeout=60, sandbox=box)


@pytest.mark.parametrize(
    "code",
    ["raise SystemExit(7)", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"],
    ids=["exit-7", "killed-by-sigterm"],
)
def test_exit_codes_and_signals_pass_through_the_bridge(base: Path, code: str) -> None:
    """The same program behind the bridge (proxy mode) and without it (none): the same end."""
    bridged = run_exit(base, code, NetworkMode.PROXY)
    direct = run_exit(base, code, NetworkMode.NONE)
    assert bridged.exit_code == direct.exit_code, (bridged.output_tail(), direct.output_tail())
    assert bridged.exit_code not in (0, None)


def test_a_module_planted_on_the_agents_pythonpath_never_runs_in_the_bridge(base: Path) -> None:
    """The bridge runs isolated (`python -I`): a `select.py` the agent writes into its worktree,
    with the loop's environment passing PYTHONPATH=. (a common setting for Python projects), is
    not what the bridge imports, so the agent's own program still starts behind it. The
    extension modules the bridge imports (select, _socket) come after PYTHONPATH in sys.path."""
    worktree = base / "work"
    (worktree / "select.py").write_text(
        "import os\nopen(os.path.join(os.path.dirname(__file__), 'planted-ran'), 'w').close()\n"
        "raise SystemExit(9)\n"
    )
    box = sandbox.make_sandbox(
        root=worktree, worktree=worktree, egress=EgressPolicy(mode=NetworkMode.PROXY)
    )
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(worktree)}
    code = "open('agent-ran', 'w').close()"
    done = process.run([PY, "-I", "-c", code], cwd=worktree, env=env, timeout=60, sandbox=box)
    assert done.exit_code == 0, done.output_tail()
    assert (worktree / "agent-ran").exists()
    assert not (worktree / "planted-ran").exists()


READY_THEN_WAIT = """
import signal, sys
if sys.argv[1] == "handle":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.mark.parametrize(("how", "expected"), [("handle", 3), ("default", -signal.SIGTERM)])
def test_the_bridge_forwards_a_signal_and_ends_as_its_child_did(
    tmp_path: Path, how: str, expected: int
) -> None:
    """Outside any sandbox: SIGTERM to the bridge reaches the child; the bridge then exits with
    the child's code, or dies of the child's signal."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # free now; the bridge listens on it next
    bridge = subprocess.Popen(
        [PY, "-I", "-S", str(BRIDGE), str(tmp_path), str(port), "--", PY, "-c",
         READY_THEN_WAIT, how],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert bridge.stdout is not None
    assert bridge.stdout.readline().strip() == "ready"
    bridge.send_signal(signal.SIGTERM)
    assert bridge.wait(timeout=60) == expected
    assert bridge.stdin is not None
    bridge.stdin.close()
    bridge.stdout.close()
