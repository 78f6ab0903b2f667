"""Scratch folders outside /tmp, and a fixture that runs a test under /tmp and outside it.

Every pytest `tmp_path` is under /tmp, which the sandbox replaces with a private, empty one and
binds back only what the agent needs, read-only. A checkout there is therefore protected twice,
and a sandbox that left the rest of the host writable (`--bind / /`) or readable would pass
every test. Users keep checkouts and homes elsewhere (/home, /srv, /opt): a folder there,
created by the test and removed after it (on failure too), shows what the sandbox itself holds.

The folder is made under the first of: `$LOOPCTL_TEST_OUTSIDE_TMP` (a developer's choice),
then, as root (CI runs as root in a fresh clone), `/home`, `/srv`, `/opt` or `/var/lib`, each
with a `loopctl-tests` folder of its own, then the folder that holds this checkout (unless that
is under /tmp itself). Folders are 0755, so that the account `nobody` can enter them when a test
gives it one (support.accounts.give_to).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from loopctl import sandbox

CHECKOUT = Path(__file__).resolve().parents[2]
_ENV = "LOOPCTL_TEST_OUTSIDE_TMP"
_ROOT_PLACES = ("/home", "/srv", "/opt", "/var/lib")
_FOLDER = "loopctl-tests"


def under_private_tmp(path: Path) -> bool:
    """Whether the sandbox hides `path` behind its private temporary folders."""
    real = Path(os.path.realpath(path))
    return any(real == Path(t) or real.is_relative_to(t) for t in sandbox.PRIVATE_TMP)


def _parents() -> list[Path]:
    chosen = os.environ.get(_ENV)
    if chosen:
        return [Path(chosen)]
    found = [Path(p) / _FOLDER for p in _ROOT_PLACES if os.geteuid() == 0 and Path(p).is_dir()]
    return [*found, CHECKOUT.parent / f".{_FOLDER}"]


@contextlib.contextmanager
def outside_tmp(prefix: str = "t") -> Iterator[Path]:
    """A new empty folder (0755) outside /tmp and /var/tmp, removed afterwards whatever
    happened; skips the test where no such place is writable (never as root)."""
    folder = None
    for parent in _parents():
        if under_private_tmp(parent):
            continue
        folder = _made_in(parent, prefix)
        if folder is not None:
            break
    if folder is None:
        if os.geteuid() == 0:
            pytest.fail(f"no folder outside /tmp could be made (tried {_parents()})")
        pytest.skip(f"no writable folder outside /tmp: set {_ENV} to one")
    try:
        yield folder
    finally:
        remove(folder)
        with contextlib.suppress(OSError):
            folder.parent.rmdir()  # only when no other test (another worker's) still uses it


def _made_in(parent: Path, prefix: str) -> Path | None:
    # Another test's clean-up may remove an empty `parent` between the two mkdirs: try again.
    for _ in range(3):
        try:
            parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            with contextlib.suppress(OSError):
                parent.chmod(0o755)  # whatever the umask was when it was made
            folder = parent / f"{prefix}-{uuid.uuid4().hex[:12]}"
            folder.mkdir(mode=0o755)
        except FileNotFoundError:
            continue
        except OSError:
            return None
        folder.chmod(0o755)  # whatever the umask: `nobody` enters it
        return folder
    return None


def under_tmp(prefix: str = "t") -> contextlib.AbstractContextManager[Path]:
    """The same under /tmp (0755, unlike pytest's tmp_path, so `nobody` can enter it)."""

    @contextlib.contextmanager
    def made() -> Iterator[Path]:
        folder = Path(tempfile.mkdtemp(prefix=f"loopctl-{prefix}-", dir="/tmp"))
        folder.chmod(0o755)
        try:
            yield folder
        finally:
            remove(folder)

    return made()


def remove(folder: Path) -> None:
    """Remove `folder` whatever its modes (an overlay's work folder is left mode 000)."""

    def unlock(function: object, path: str, exc: object) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(path), stat.S_IRWXU)
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, stat.S_IRWXU)
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)

    if folder.exists():
        shutil.rmtree(folder, onerror=unlock)


@dataclass(frozen=True, slots=True)
class Place:
    """Where a test keeps its checkout and HOME: `base` under /tmp or outside it."""

    kind: str  # "tmp" | "outside-tmp"
    base: Path
    home: Path


@pytest.fixture(params=["tmp", "outside-tmp"])
def place(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Place]:
    """A base folder for the test's checkouts, and HOME set to `base/home`: once under /tmp,
    once outside it (where the sandbox's private /tmp protects nothing)."""
    kind = str(request.param)
    made = under_tmp("place") if kind == "tmp" else outside_tmp("place")
    with made as base:
        assert under_private_tmp(base) == (kind == "tmp"), base
        home = base / "home"
        home.mkdir()
        monkeypatch.setenv("HOME", str(home))
        yield Place(kind, base, home)
