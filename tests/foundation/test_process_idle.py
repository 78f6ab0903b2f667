"""`process.run(idle=...)`: a program that makes no progress is ended as stalled (issue 30)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from loopctl.idle import IdleLimit, TreeWatch
from loopctl.process import run

PY = sys.executable
# Each hanging program gives up by itself long after any idle limit here: a safety net.
HANG = "import time; time.sleep(60)"


@pytest.fixture
def env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", os.defpath)}


def test_a_silent_program_is_ended_as_stalled_not_timed_out(
    tmp_path: Path, env: dict[str, str]
) -> None:
    done = run([PY, "-c", HANG], cwd=tmp_path, env=env, timeout=60, idle=IdleLimit(0.5))

    assert done.stalled
    assert not done.timed_out
    assert not done.interrupted
    assert not done.ok
    assert done.exit_code is None
    assert done.duration_s < 30


def test_output_is_progress_until_it_stops(tmp_path: Path, env: dict[str, str]) -> None:
    # Prints for about twice the limit, then hangs: it ends stalled, its last line kept.
    code = (
        "import time\n"
        "for i in range(20):\n"
        "    print(f'tick {i}', flush=True); time.sleep(0.05)\n"
        "print('about to hang', flush=True)\n"
        "time.sleep(60)\n"
    )
    done = run([PY, "-c", code], cwd=tmp_path, env=env, timeout=60, idle=IdleLimit(0.5))

    assert done.stalled
    assert "tick 19" in done.stdout_tail
    assert done.stdout_tail.rstrip().endswith("about to hang")


def test_a_changing_file_is_progress(tmp_path: Path, env: dict[str, str]) -> None:
    work = tmp_path / "work"
    work.mkdir()
    code = (
        "import time, pathlib\n"
        "end = time.monotonic() + 4\n"
        "i = 0\n"
        "while time.monotonic() < end:\n"
        "    i += 1; pathlib.Path('state.txt').write_text(str(i)); time.sleep(0.05)\n"
    )
    done = run(
        [PY, "-c", code], cwd=work, env=env, timeout=60, idle=IdleLimit(1.5, TreeWatch([work]))
    )

    assert not done.stalled
    assert done.ok


def test_no_idle_limit_leaves_a_quiet_program_alone(tmp_path: Path, env: dict[str, str]) -> None:
    done = run([PY, "-c", "import time; time.sleep(0.3)"], cwd=tmp_path, env=env, timeout=60)

    assert done.ok
    assert not done.stalled


def test_a_program_that_dies_is_not_stalled(tmp_path: Path, env: dict[str, str]) -> None:
    done = run([PY, "-c", "raise SystemExit(3)"], cwd=tmp_path, env=env, idle=IdleLimit(5))

    assert done.exit_code == 3
    assert not done.stalled
    assert not done.timed_out


def test_the_timeout_still_wins_when_it_comes_first(tmp_path: Path, env: dict[str, str]) -> None:
    done = run([PY, "-c", HANG], cwd=tmp_path, env=env, timeout=0.5, idle=IdleLimit(30))

    assert done.timed_out
    assert not done.stalled


def test_tree_watch_sees_writes_creations_and_removals(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one")
    (tmp_path / ".git").mkdir()
    watch = TreeWatch([tmp_path])
    assert not watch()

    (tmp_path / "sub").mkdir()
    assert watch()
    (tmp_path / "sub" / "b.txt").write_text("two")
    assert watch()
    assert not watch()
    (tmp_path / "a.txt").write_text("three!")
    assert watch()
    (tmp_path / "sub" / "b.txt").unlink()
    assert watch()
    # git's own bookkeeping is not the program's work.
    (tmp_path / ".git" / "index").write_text("x")
    assert not watch()


def test_an_edit_deep_in_the_tree_is_progress(tmp_path: Path, env: dict[str, str]) -> None:
    """A silent maker rewriting a file it already has, three folders down (no folder's own
    time moves): that is work, not a hang."""
    deep = tmp_path / "work" / "src" / "pkg" / "sub"
    deep.mkdir(parents=True)
    (deep / "mod.py").write_text("0")
    code = (
        "import time, pathlib\n"
        "end = time.monotonic() + 4\n"
        "path = pathlib.Path('src/pkg/sub/mod.py')\n"
        "while time.monotonic() < end:\n"
        "    path.write_text(path.read_text() + 'x'); time.sleep(0.05)\n"
    )
    work = tmp_path / "work"
    watch = TreeWatch([work])
    (deep / "mod.py").write_text("0 but longer")  # rewritten in place: only the file moved
    assert watch()

    done = run([PY, "-c", code], cwd=work, env=env, timeout=60, idle=IdleLimit(1.5, watch))

    assert not done.stalled
    assert done.ok


def test_tree_watch_is_bounded(tmp_path: Path) -> None:
    for index in range(30):
        (tmp_path / f"f{index:02}").write_text("x")
    watch = TreeWatch([tmp_path], max_entries=10)

    (tmp_path / "f29").write_text("changed beyond the bound")
    assert not watch()  # past the bound: not looked at
    (tmp_path / "f00").write_text("changed within it")
    assert watch()
