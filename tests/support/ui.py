"""The dashboard as a user starts it: `loopctl ui --no-open` in a subprocess, its URL read from
its terminal output; and a real Chromium (Debian's package) driven by Playwright."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from support.cli import loopctl_argv

SCREENSHOTS = Path(__file__).parents[1] / "screenshots"


@dataclass(frozen=True)
class Dashboard:
    url: str  # with the token, as printed
    base: str  # http://127.0.0.1:PORT
    token: str
    port: int
    process: subprocess.Popen[str]


@contextlib.contextmanager
def dashboard(repo: Path, *args: str) -> Iterator[Dashboard]:
    """`loopctl ui --no-open` serving `repo` until the block ends (then Ctrl-C, as a user)."""
    process = subprocess.Popen(
        loopctl_argv("ui", "--no-open", *args),
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
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
        parts = urlsplit(url)
        token = parts.query.removeprefix("token=")
        assert parts.port is not None
        yield Dashboard(url, f"{parts.scheme}://{parts.netloc}", token, parts.port, process)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


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
