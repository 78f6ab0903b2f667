"""The debug log (issue 28, item 6): an exception loopctl deliberately carries on past leaves a
trace, shown only when asked for with LOOPCTL_DEBUG=1 or `-v`, with secrets redacted.

The exception here is real: `loopctl validate` cannot write its cache because `.loop/cache` is a
file, not a folder. The answer is the same either way; only the debug log tells why the next run
will be slower.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.repos import make_repo

from loopctl.cli.debug_log import wanted
from loopctl.commands.init import init_project
from loopctl.definitions import load_project
from loopctl.errors import swallowed
from loopctl.journal.events import Event
from loopctl.journal.recorder import Recorder

SECRET = "s3cr3t-value-not-for-logs-0123456789"


def _validate(repo: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopctl", "validate"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
        check=False,
    )


@pytest.fixture
def blocked_cache(tmp_path: Path) -> Path:
    """A project whose validation cache cannot be written, in a folder named by a secret."""
    repo = make_repo(tmp_path / SECRET / "repo")
    init_project(repo, which=lambda _: None)
    (repo / ".loop" / "cache").write_text("a file where the cache folder should be\n")
    return repo


def test_a_swallowed_exception_is_logged_under_loopctl_debug(blocked_cache: Path) -> None:
    quiet = _validate(blocked_cache, LOOPCTL_DEBUG="0")
    shown = _validate(blocked_cache, LOOPCTL_DEBUG="1", EXAMPLE_API_TOKEN=SECRET)

    assert (quiet.returncode, quiet.stderr) == (0, "")
    assert (shown.returncode, shown.stdout) == (0, quiet.stdout)  # the same answer
    lines = shown.stderr.splitlines()
    assert lines[0] == (
        "loopctl debug: loopctl.cli.validation_cache: writing the validation cache failed;"
        " carrying on"
    )
    assert lines[1] == "Traceback (most recent call last):"
    assert lines[-1].startswith("FileExistsError: ")  # mkdir of the cache folder
    assert "[REDACTED]" in lines[-1]  # the path holds the secret's value
    assert SECRET not in shown.stderr


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (["validate"], {}, False),
        (["validate"], {"LOOPCTL_DEBUG": "1"}, True),
        (["validate"], {"LOOPCTL_DEBUG": "0"}, False),
        (["validate"], {"LOOPCTL_DEBUG": ""}, False),
        (["run", "nightly", "--once", "-v"], {}, True),
        (["goal", "tests green", "--verbose"], {}, True),
        (["goal", "tests green", "-q"], {}, False),
    ],
)
def test_the_debug_log_is_asked_for_by_flag_or_environment(
    args: list[str], env: dict[str, str], expected: bool
) -> None:
    assert wanted(args, env) is expected


def test_swallowed_logs_what_it_carries_on_past_and_lets_the_rest_through(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger("loopctl.test")
    caplog.set_level(logging.DEBUG, logger="loopctl")

    with swallowed(logger, "reading the thing", OSError):
        raise FileNotFoundError("gone")
    with pytest.raises(ValueError, match="not an OSError"), swallowed(logger, "x", OSError):
        raise ValueError("not an OSError")
    with swallowed(logger, "anything"):  # no kinds named: any Exception
        raise RuntimeError("broken view")

    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        ("loopctl.test", "reading the thing failed; carrying on"),
        ("loopctl.test", "anything failed; carrying on"),
    ]
    assert [type(r.exc_info[1]) for r in caplog.records if r.exc_info] == [
        FileNotFoundError,
        RuntimeError,
    ]


def test_a_view_that_breaks_does_not_stop_the_work_and_leaves_a_trace(
    repo: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The recorder's observer (the live view) raising: the event is appended all the same."""

    def broken_view(event: Event) -> None:
        raise RuntimeError(f"the view cannot show {event.type}")

    init_project(repo, which=lambda _: None)
    rec = Recorder(load_project(repo), observer=broken_view)
    caplog.set_level(logging.DEBUG, logger="loopctl")

    event = rec.emit("note", run=None, loop=None, what="hello")

    assert [e.seq for e in rec.log.read()] == [event.seq]
    (record,) = [r for r in caplog.records if r.name == "loopctl.journal.recorder"]
    assert record.getMessage() == f"the observer of event {event.seq} failed; carrying on"
    assert record.exc_info is not None
    assert str(record.exc_info[1]) == "the view cannot show note"
