"""`loopctl demo` from a plain install: no dev tools, a hint that works as printed, no leftovers.

The plain install is a real virtual environment (no system site-packages) holding exactly
loopctl's runtime dependency closure, computed from pyproject.toml and each distribution's own
metadata, linked from the dev environment: what `pip install <the package>` would give, without
the network and in well under a second. pytest, ruff and mypy are not in it.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from support.cli import assert_clean_exit

ROOT = Path(__file__).resolve().parents[2]
SYSTEM_PATH = "/usr/bin:/bin"  # git, and no loopctl, python or agent CLI


def runtime_closure() -> list[importlib.metadata.Distribution]:
    """The distributions a plain install of loopctl brings: its dependencies, transitively."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pending = [(Requirement(text), "") for text in project["dependencies"]]
    found: dict[str, importlib.metadata.Distribution] = {}
    while pending:
        requirement, extra = pending.pop()
        if requirement.marker is not None and not _holds(requirement.marker, extra):
            continue
        name = canonicalize_name(requirement.name)
        if name in found:
            continue
        dist = importlib.metadata.distribution(requirement.name)
        assert requirement.specifier.contains(dist.version, prereleases=True), (
            f"the dev environment has {name} {dist.version}, outside {requirement}"
        )
        found[name] = dist
        for text in dist.requires or []:
            for wanted in ("", *requirement.extras):
                pending.append((Requirement(text), wanted))
    return list(found.values())


def _holds(marker: Marker, extra: str) -> bool:
    return marker.evaluate({"extra": extra})


def plain_venv(where: Path) -> Path:
    """A venv with loopctl, its runtime closure and a `loopctl` script; returns its python."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(where)],
        check=True,
        capture_output=True,
    )
    python = where / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (site / "loopctl").symlink_to(ROOT / "loopctl", target_is_directory=True)
    for dist in runtime_closure():
        files = dist.files
        assert files, f"{dist.metadata['Name']} lists no files: cannot link it"
        for top in {f.parts[0] for f in files if f.parts[0] not in ("..", "__pycache__")}:
            source = Path(str(dist.locate_file(top)))
            if source.exists() and not (site / top).exists():
                (site / top).symlink_to(source, target_is_directory=source.is_dir())
    # The console script pip writes for `[project.scripts] loopctl`.
    script = where / "bin" / "loopctl"
    script.write_text(
        f"#!{python}\nimport sys\nfrom loopctl.__main__ import main\nsys.exit(main())\n"
    )
    script.chmod(0o755)
    return python


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return plain_venv(tmp_path_factory.mktemp("plain") / "venv")


def _env(tmp: Path) -> dict[str, str]:
    scratch = tmp / "scratch"
    scratch.mkdir()
    # Not activated, as after the README's set-up; TMPDIR shows what the demo leaves.
    return {**os.environ, "PATH": SYSTEM_PATH, "TMPDIR": str(scratch)}


def test_the_plain_install_has_no_dev_tools(venv: Path) -> None:
    for module in ("pytest", "ruff", "mypy"):
        missing = subprocess.run([str(venv), "-c", f"import {module}"], capture_output=True)
        assert missing.returncode != 0, f"{module} leaked into the plain install"
    done = subprocess.run(
        [str(venv), "-c", "import loopctl.cli, yaml, typer, httpx"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("entry", ["script", "module"])
def test_demo_from_a_plain_install_and_its_hint_works_as_printed(
    venv: Path, tmp_path: Path, entry: str
) -> None:
    env = _env(tmp_path)
    argv = [str(venv.parent / "loopctl")] if entry == "script" else [str(venv), "-m", "loopctl"]

    done = subprocess.run(
        [*argv, "demo"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )

    assert_clean_exit(done, 0)
    # A fix, its diff, a gated push approved and landed: the product, not a state file.
    assert "task main: awaiting_approval after 1 attempt(s)" in done.stdout
    assert "-    return a - b\n+    return a + b" in done.stdout
    assert re.search(r"^approved \w+: `push` and the rest of the delivery ran", done.stdout, re.M)
    landed = re.search(r"^origin now has loop/fix/main at ([0-9a-f]{12})", done.stdout, re.M)
    assert landed is not None, done.stdout
    assert "# Loop state" not in done.stdout  # no raw STATE.md markdown
    hint = re.search(r"^explore it: (.+)$", done.stdout, re.M)
    assert hint is not None, done.stdout
    command = hint.group(1)
    assert shlex.split(command)[0] == "cd"
    followed = subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, env=env, timeout=60
    )
    assert followed.returncode == 0, f"{command}\n{followed.stderr}"
    assert "fix" in followed.stdout
    assert "tick_started" in followed.stdout or "run" in followed.stdout
    assert "approved" in followed.stdout
    root = Path(shlex.split(command)[1])
    pushed = subprocess.run(
        ["git", "ls-remote", "origin", "refs/heads/loop/fix/main"],
        cwd=root,
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert pushed.stdout.startswith(
        subprocess.run(
            ["git", "rev-parse", landed.group(1)], cwd=root, capture_output=True, text=True, env=env
        ).stdout.strip()
    )
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, env=env
    )
    assert status.stdout == "", status.stdout  # the checkout stays clean


def test_demo_without_keep_leaves_nothing_behind(venv: Path, tmp_path: Path) -> None:
    env = _env(tmp_path)
    cache = Path(env["LOOPCTL_HOME"])

    done = subprocess.run(
        [str(venv), "-m", "loopctl", "demo", "--no-keep"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )

    left = sorted(str(p.relative_to(cache)) for p in cache.rglob("*")) if cache.exists() else []
    assert left == [], left
    assert list((tmp_path / "scratch").iterdir()) == []
    assert_clean_exit(done, 0)


def test_the_demos_test_runner_needs_only_the_standard_library(tmp_path: Path) -> None:
    """The generated tests/run_tests.py runs under any Python 3 (`-I -S`: no site-packages, so
    no loopctl): it imports nothing of loopctl's, and reports add()'s bug as a test failure."""
    from loopctl.commands.demo import make_demo_repo

    root = make_demo_repo(tmp_path, None)

    done = subprocess.run(
        [sys.executable, "-I", "-S", "tests/run_tests.py"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAILED tests/test_calc.py::test_add" in done.stdout
    assert done.stdout.rstrip().endswith("1 failed, 1 passed"), done.stdout
    assert "ModuleNotFoundError" not in done.stderr


def test_the_demo_agents_usage_line_names_a_module_that_runs(tmp_path: Path) -> None:
    def usage(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv, cwd=tmp_path, input="", capture_output=True, text=True, timeout=300, check=False
        )

    done = usage([sys.executable, "-m", "loopctl.commands.demo_agent"])
    printed = re.fullmatch(r"usage: python -m (\S+) TEST-COMMAND \[ARG\.\.\.\]\n", done.stderr)
    assert done.returncode == 2
    assert printed is not None, done.stderr

    again = usage([sys.executable, "-m", printed[1]])

    assert (again.returncode, again.stderr) == (2, done.stderr)
