"""loopctl.seeds and loopctl.warm: setup runs only when its inputs change, a seed is a private
copy per inputs hash that nothing writes through, and a touched seed is never handed on."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support.repos import git

from loopctl import warm
from loopctl.definitions.fields import parse_size
from loopctl.seeds import (
    SeedStore,
    SeedTampered,
    detect_inputs,
    detect_preserve,
    inputs_hash,
    tree_digest,
)

# A setup that "installs" dependencies offline: a tree generated from the lockfile.
INSTALL = [
    sys.executable,
    "-c",
    "import pathlib,sys\n"
    "lock = pathlib.Path('package-lock.json').read_text()\n"
    "root = pathlib.Path('node_modules')\n"
    "for i in range(20):\n"
    "    d = root / f'pkg{i}'\n"
    "    d.mkdir(parents=True, exist_ok=True)\n"
    "    (d / 'index.js').write_text(f'// {lock.strip()} {i}\\n')\n"
    "(root / '.bin').mkdir(exist_ok=True)\n"
    "(root / '.bin' / 'tool').symlink_to('../pkg0/index.js')\n",
]


@pytest.fixture
def project(repo: Path) -> Path:
    (repo / ".gitignore").write_text("node_modules/\n")
    (repo / "package.json").write_text('{"name": "x"}\n')
    (repo / "package-lock.json").write_text('{"lock": 1}\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "npm project")
    return repo


def _worktree(project: Path, tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    git(project, "worktree", "add", "-q", "--detach", str(path), "HEAD")
    return path


def _runner(path: Path, counter: list[str], argv: list[str] | None = None) -> Callable[[], None]:
    def run() -> None:
        counter.append(str(path))
        subprocess.run(argv or INSTALL, cwd=path, check=True)

    return run


def test_defaults_are_detected_per_ecosystem(tmp_path: Path) -> None:
    for name in (
        "package.json",
        "pnpm-lock.yaml",
        "uv.lock",
        "pyproject.toml",
        "Cargo.toml",
        "Cargo.lock",
        "go.mod",
        "go.sum",
        "requirements-dev.txt",
        "README.md",
    ):
        (tmp_path / name).write_text("x\n")
    inputs = detect_inputs(tmp_path)
    assert inputs == (
        "package.json", "pnpm-lock.yaml", "uv.lock", "pyproject.toml", "requirements-dev.txt",
        "Cargo.toml", "Cargo.lock", "go.mod", "go.sum",
    )  # fmt: skip
    assert detect_preserve(tmp_path) == ("node_modules", ".venv", "target")
    assert detect_preserve(tmp_path / "nothing-here") == ()


def test_the_hash_follows_the_inputs_and_the_commands(project: Path) -> None:
    inputs = ["package.json", "package-lock.json"]
    first = inputs_hash(project, inputs, [["npm", "ci"]], ["node_modules"])
    assert first == inputs_hash(project, inputs, [["npm", "ci"]], ["node_modules"])
    assert first != inputs_hash(project, inputs, [["npm", "install"]], ["node_modules"])
    assert first != inputs_hash(project, inputs, [["npm", "ci"]], ["node_modules", ".venv"])
    (project / "package-lock.json").write_text('{"lock": 2}\n')
    assert first != inputs_hash(project, inputs, [["npm", "ci"]], ["node_modules"])


def test_first_workspace_runs_setup_and_publishes_the_next_one_is_seeded(
    project: Path, tmp_path: Path
) -> None:
    store = SeedStore(tmp_path / "seeds")
    ran: list[str] = []
    first = _worktree(project, tmp_path, "one")
    common = {
        "setup": [INSTALL],
        "inputs": ["package-lock.json"],
        "preserve": ["node_modules"],
        "store": store,
        "last_hash": None,
        "intact": False,
        "last_setup_s": 0.0,
    }
    done = warm.prepare(first, **common, run_setup=_runner(first, ran))  # type: ignore[arg-type]
    assert (done.decision, done.published, done.reusable) == ("ran", True, True)
    second = _worktree(project, tmp_path, "two")
    seeded = warm.prepare(second, **common, run_setup=_runner(second, ran))  # type: ignore[arg-type]
    assert seeded.decision == "seeded"
    assert seeded.method in ("reflink", "copy")
    assert ran == [str(first)]
    assert (second / "node_modules" / ".bin" / "tool").is_symlink()
    original = (first / "node_modules" / "pkg3" / "index.js").read_text()
    assert (second / "node_modules" / "pkg3" / "index.js").read_text() == original
    # A private copy: a write in the worktree reaches neither the seed nor another worktree.
    copy = second / "node_modules" / "pkg3" / "index.js"
    assert copy.stat().st_nlink == 1
    copy.write_text("evil\n")
    seed = store.get(done.inputs_hash or "")
    assert seed is not None
    assert (seed.path / "tree" / "node_modules" / "pkg3" / "index.js").read_text() == original


def test_a_recycled_workspace_with_the_same_inputs_skips_setup(
    project: Path, tmp_path: Path
) -> None:
    store = SeedStore(tmp_path / "seeds")
    path = _worktree(project, tmp_path, "one")
    ran: list[str] = []
    first = warm.prepare(
        path, setup=[INSTALL], inputs=["package-lock.json"], preserve=["node_modules"],
        store=store, last_hash=None, intact=False, last_setup_s=0.0,
        run_setup=_runner(path, ran),
    )  # fmt: skip
    again = warm.prepare(
        path, setup=[INSTALL], inputs=["package-lock.json"], preserve=["node_modules"],
        store=store, last_hash=first.inputs_hash, intact=True, last_setup_s=first.setup_s,
        run_setup=_runner(path, ran),
    )  # fmt: skip
    assert again.decision == "skipped"
    assert len(ran) == 1
    assert again.saved_s == first.setup_s
    # Not intact (the pool found the folder touched): the seed serves, setup still does not run.
    reseeded = warm.prepare(
        path, setup=[INSTALL], inputs=["package-lock.json"], preserve=["node_modules"],
        store=store, last_hash=first.inputs_hash, intact=False, last_setup_s=first.setup_s,
        run_setup=_runner(path, ran),
    )  # fmt: skip
    assert reseeded.decision == "seeded"
    assert len(ran) == 1
    # The lockfile changed: setup runs, on a workspace without the old folders.
    (path / "package-lock.json").write_text('{"lock": 2}\n')
    (path / "node_modules" / "stale-from-old-lock").write_text("x\n")
    changed = warm.prepare(
        path, setup=[INSTALL], inputs=["package-lock.json"], preserve=["node_modules"],
        store=store, last_hash=first.inputs_hash, intact=True, last_setup_s=first.setup_s,
        run_setup=_runner(path, ran),
    )  # fmt: skip
    assert changed.decision == "ran"
    assert changed.reason == "setup inputs changed"
    assert not (path / "node_modules" / "stale-from-old-lock").exists()
    assert len(store.seeds()) == 2  # one per hash, never shared


def test_a_setup_that_writes_outside_the_preserved_folders_always_runs(
    project: Path, tmp_path: Path
) -> None:
    store = SeedStore(tmp_path / "seeds")
    path = _worktree(project, tmp_path, "one")
    argv = [sys.executable, "-c", "import pathlib; pathlib.Path('generated.py').write_text('x')"]
    done = warm.prepare(
        path, setup=[argv], inputs=["package-lock.json"], preserve=["node_modules"],
        store=store, last_hash=None, intact=False, last_setup_s=0.0,
        run_setup=_runner(path, [], argv),
    )  # fmt: skip
    assert done.decision == "ran"
    assert not done.reusable
    assert not done.published
    assert "runs every time" in done.reason
    assert store.seeds() == []


def test_a_failed_setup_publishes_nothing(project: Path, tmp_path: Path) -> None:
    store = SeedStore(tmp_path / "seeds")
    path = _worktree(project, tmp_path, "one")

    def failing() -> None:
        (path / "node_modules").mkdir()
        (path / "node_modules" / "half").write_text("x\n")
        raise RuntimeError("setup exited 1")

    with pytest.raises(RuntimeError):
        warm.prepare(
            path, setup=[INSTALL], inputs=["package-lock.json"], preserve=["node_modules"],
            store=store, last_hash=None, intact=False, last_setup_s=0.0, run_setup=failing,
        )  # fmt: skip
    assert store.seeds() == []


@pytest.mark.parametrize("how", ["write", "chmod", "add", "remove", "mtime-restored"])
def test_a_seed_anything_touched_is_dropped_not_handed_on(
    project: Path, tmp_path: Path, how: str
) -> None:
    store = SeedStore(tmp_path / "seeds")
    path = _worktree(project, tmp_path, "one")
    subprocess.run(INSTALL, cwd=path, check=True)
    seed = store.publish("h" * 64, path, ["node_modules"], 1.5)
    assert seed is not None
    assert store.verify(seed)
    victim = seed.path / "tree" / "node_modules" / "pkg1" / "index.js"
    stamp = victim.stat()
    if how == "write":
        victim.write_text("evil\n")
    elif how == "chmod":
        victim.chmod(0o777)
    elif how == "add":
        (victim.parent / "extra.js").write_text("evil\n")
    elif how == "remove":
        victim.unlink()
    else:
        victim.write_text('// {"lock": 1} X\n')
        os.utime(victim, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    target = tmp_path / "two"
    target.mkdir()
    with pytest.raises(SeedTampered):
        store.restore(seed, target)
    assert not (target / "node_modules").exists()
    assert store.get("h" * 64) is None
    assert not seed.path.exists()


def test_prune_drops_old_seeds_then_the_least_recently_used_beyond_the_size(
    project: Path, tmp_path: Path
) -> None:
    store = SeedStore(tmp_path / "seeds")
    path = _worktree(project, tmp_path, "one")
    subprocess.run(INSTALL, cwd=path, check=True)
    for index, name in enumerate(("a", "b", "c")):
        seed = store.publish(name * 64, path, ["node_modules"], 1.0)
        assert seed is not None
        os.utime(seed.path / "seed.json", (1000.0 + index, 1000.0 + index))
    size = store.seeds()[0].bytes
    assert store.prune(max_age_s=None, max_bytes=2 * size) != []
    assert [s.inputs_hash[0] for s in store.seeds()] == ["c", "b"]
    dropped = store.prune(max_age_s=10.0, max_bytes=None, now=1011.5)
    assert [s.inputs_hash[0] for s in dropped] == ["b"]
    assert [s.inputs_hash[0] for s in store.seeds()] == ["c"]


def test_tree_digest_sees_what_a_maker_could_hide(tmp_path: Path) -> None:
    folder = tmp_path / "deps"
    folder.mkdir()
    (folder / "a.js").write_text("1\n")
    first = tree_digest(folder)
    assert tree_digest(folder) == first
    stamp = (folder / "a.js").stat()
    (folder / "a.js").write_text("2\n")
    os.utime(folder / "a.js", ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert tree_digest(folder) != first
    assert tree_digest(tmp_path / "missing") == "absent"


@pytest.mark.parametrize(
    ("text", "size"), [("500MB", 500_000_000), ("2GB", 2_000_000_000), ("1GiB", 1 << 30),
                       ("1024", 1024), ("1.5kb", 1500)]
)  # fmt: skip
def test_sizes_parse(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "lots", "5 parsecs", "0MB", "-1GB"])
def test_bad_sizes_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="size"):
        parse_size(text)
