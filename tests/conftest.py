"""Test isolation: every test gets its own HOME, cache and git config, and may not touch ours."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.repos import make_repo

REAL_HOME = Path.home()
# Fixtures every test module may use without importing them: `place` (checkouts and HOME under
# /tmp and outside it) and `hook` (a webhook receiver on 127.0.0.1).
pytest_plugins = ("support.outside_tmp", "support.webhook")

# A suite started in the background by a shell without job control (`pytest … &` in a script)
# inherits SIGINT ignored, and so would every loopctl and program it starts: the tests of Ctrl-C
# would see a run finish instead of stop. Ctrl-C is given back, as a terminal would have it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(optionalhook=True)  # without xdist (`-p no:xdist`) nobody calls it
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` (the README's test command) starts one worker more than there are cores.

    About a tenth of the suite's time is waiting, not computing (model servers, timers, an
    agent CLI starting), and a third worker on 2 cores fills it: the whole suite took 1,974 s
    on 3 workers beside a mutation run, against 2,037 s on 2 workers alone (2026-12-06). A
    fourth fills nothing more: CI's pytest took 1,500.57 s on 4 workers, 1,421.86 s on 3, the
    same commit on the same idle machine (2026-12-07).
    $PYTEST_XDIST_AUTO_NUM_WORKERS still chooses (xdist's own hook reads it)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return len(os.sched_getaffinity(0)) + 1


# Tests of minutes, started first. Collected late, the fast mutation set started 255 s before the
# end of a CI run (2026-12-07) and ran there alone while the other workers sat idle.
LONG_FIRST = ("tests/test_mutation_fast.py", "tests/reliability/test_crash_anywhere.py")


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # once, in the controller
        warm_pytest_rewrite_cache()


def warm_pytest_rewrite_cache() -> None:
    """Let pytest cache its rewrite of the plugins installed in this venv, once.

    pytest rewrites the asserts of every module of a plugin it loads from an entry point, and
    caches the result beside the module's bytecode. Under $PYTHONDONTWRITEBYTECODE, or in the
    sandbox (the venv read-only), it cannot, so each check that runs this venv's pytest rewrote
    Hypothesis again when it printed its summary: 1.4 s a run instead of 0.7 s, a few hundred
    times a suite. A user's own venv has the cache from their first pytest run; this gives the
    suite's venv the same."""
    import hypothesis

    tag = f"{sys.implementation.cache_tag}-pytest-{pytest.__version__}"
    cached = Path(hypothesis.__file__).parent / "__pycache__" / f"core.{tag}.pyc"
    if cached.exists() or not os.access(cached.parent, os.W_OK):
        return
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "test_warm.py").write_text("def test_warm():\n    assert True\n")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", folder],
            cwd=folder,
            env=env,
            capture_output=True,
            check=False,
            timeout=300,
        )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A stable sort, the same in every xdist worker (they must collect one order).
    def rank(item: pytest.Item) -> int:
        firsts = (n for n, prefix in enumerate(LONG_FIRST) if item.nodeid.startswith(prefix))
        return next(firsts, len(LONG_FIRST))

    items.sort(key=rank)


@pytest.fixture(autouse=True)
def isolated_environment(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("home")
    gitconfig = home / ".gitconfig-empty"
    gitconfig.write_text("")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("LOOPCTL_HOME", str(home / ".loopctl"))
    for name in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        monkeypatch.setenv(name, str(home / name.lower()))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in list(os.environ):
        kept = ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM")
        git_leak = name.startswith("GIT_") and name not in kept
        # OTEL_*: a developer's own collector must not receive the tests' spans.
        if git_leak or name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    before = _home_snapshot()
    yield home
    # New entries only, named: with several xdist workers the writer may be a test running
    # beside this one, and the names say which code to look at.
    added = sorted(_home_snapshot() - before)
    assert not added, f"a test wrote to the real home directory: {', '.join(added)}"


def _home_snapshot() -> set[str]:
    # Only the top level and loopctl's own folders: cheap, and where a leak would land.
    watched = [REAL_HOME, REAL_HOME / ".cache" / "loopctl", REAL_HOME / ".loopctl"]
    entries: set[str] = set()
    for folder in watched:
        if folder.is_dir():
            entries.update(str(p) for p in folder.iterdir())
    return entries


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit."""
    return make_repo(tmp_path / "repo")
