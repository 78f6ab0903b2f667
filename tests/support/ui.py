"""The dashboard as a user starts it: `loopctl ui --no-open` in a subprocess, its URL read from
its terminal output; and a real Chromium (Debian's package) driven by Playwright."""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import httpx
import pytest

from support.cli import loopctl_argv

SCREENSHOTS = Path(__file__).parents[1] / "screenshots"


@dataclass(frozen=True)
class Dashboard:
    url: str  # the first one-time link, as printed
    base: str  # http://127.0.0.1:PORT
    token: str  # the first link's token
    port: int
    process: subprocess.Popen[str]
    lines: queue.Queue[str]  # what it printed after its first link, line by line

    @property
    def cookie(self) -> str:
        return f"loopctl_ui_{self.port}"

    def next_link(self, timeout: float = 30.0) -> str:
        """The next one-time link it prints (after Enter or SIGUSR1)."""
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                pytest.fail(f"loopctl ui printed no new link within {timeout:g}s")
            if line.strip().startswith("open http"):
                return line.split()[1]

    def new_link(self, via: str = "signal") -> str:
        """Ask for a new one-time link as a human does: SIGUSR1, or Enter on its input."""
        if via == "signal":
            self.process.send_signal(signal.SIGUSR1)
        else:
            assert self.process.stdin is not None, "start it with stdin=subprocess.PIPE"
            self.process.stdin.write("\n")
            self.process.stdin.flush()
        return self.next_link()

    @contextlib.contextmanager
    def session(self, link: str | None = None, **options: Any) -> Iterator[httpx.Client]:
        """A client signed in as a browser is: `link` (default: the first) traded for the
        session cookie, which the redirect sets; the link then dies."""
        with httpx.Client(**{"timeout": 30, **options}) as client:
            answer = client.get(link or self.url, follow_redirects=False)
            assert answer.status_code == 303, answer.text
            assert "token=" not in answer.headers["location"]
            assert client.cookies.get(self.cookie), answer.headers
            yield client


@contextlib.contextmanager
def dashboard(repo: Path, *args: str, stdin: int = subprocess.DEVNULL) -> Iterator[Dashboard]:
    """`loopctl ui --no-open` serving `repo` until the block ends (then Ctrl-C, as a user)."""
    process = subprocess.Popen(
        loopctl_argv("ui", "--no-open", *args),
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=stdin,
        text=True,
    )
    pump: threading.Thread | None = None
    try:
        assert process.stdout is not None
        url = ""
        for _ in range(10):
            line = process.stdout.readline()
            if not line:
                break
            if line.strip().startswith("open http"):
                url = line.split()[1]
                break
        if not url:
            process.kill()
            _, err = process.communicate(timeout=10)
            pytest.fail(f"loopctl ui printed no URL; stderr:\n{err}")
        # The rest of its output, read as it comes: a test waits for a line, never on a pipe.
        lines: queue.Queue[str] = queue.Queue()
        pump = threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True)
        pump.start()
        parts = urlsplit(url)
        token = parts.query.removeprefix("token=")
        assert parts.port is not None
        yield Dashboard(url, f"{parts.scheme}://{parts.netloc}", token, parts.port, process, lines)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        if pump is not None:
            pump.join(timeout=10)  # the process is gone: its output ends
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def _pump(stream: IO[str], lines: queue.Queue[str]) -> None:
    with contextlib.suppress(ValueError, OSError):  # closed when the test ends
        for line in stream:
            lines.put(line)


def chromium_path() -> str:
    """Debian's chromium (`.ci/run` installs it): Playwright never downloads a browser here."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("no chromium on PATH: apt-get install -y chromium (as .ci/run does)")
    return found


@contextlib.contextmanager
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    # Playwright's driver must not look for its own browser downloads.
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    with sync_playwright() as play:
        launched = play.chromium.launch(executable_path=chromium_path(), headless=True)
        try:
            yield launched
        finally:
            launched.close()


def screenshot(page: object, name: str) -> Path:
    """A full-page PNG under tests/screenshots/ (ignored by git), for a person to look at."""
    SCREENSHOTS.mkdir(exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)  # type: ignore[attr-defined]
    return path


@contextlib.contextmanager
def served(repo: Path, sessions: Any) -> Iterator[str]:
    """The dashboard's own app on 127.0.0.1 in a thread of the test, with `sessions` (whose
    clock the test moves): its base URL. For what a test cannot wait for in a real process."""
    import uvicorn

    from loopctl.ui import server
    from loopctl.ui.security import Guard

    sock = server.bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    board = server.Dashboard(root=repo, guard=Guard(host="127.0.0.1", port=port), sessions=sessions)
    config = uvicorn.Config(
        server.build_app(board), log_level="warning", access_log=False, lifespan="off"
    )
    app_server = uvicorn.Server(config)
    # Off the main thread uvicorn installs no signal handler: the test's own stay in place.
    thread = threading.Thread(target=app_server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        app_server.should_exit = True
        thread.join(timeout=15)
        board.workers.shutdown(wait=False, cancel_futures=True)
        sock.close()


def act(
    session: httpx.Client, base: str, item: str, action: str, headers: dict[str, str], **form: str
) -> dict[str, Any]:
    """An action as the page's script sends it: answered at once (202 and a job), then its
    state, followed until it ends."""
    started = session.post(
        f"{base}/inbox/{item}/{action}",
        headers={**headers, "Accept": "application/json"},
        data=form,
    )
    assert started.status_code == 202, started.text
    job = started.json()
    assert (job["item"], job["action"]) == (item, action)
    while True:
        state: dict[str, Any] = session.get(f"{base}{job['state']}?wait=20").json()
        if state["done"]:
            return state
