"""loopctl's own interpreter under /tmp (loopctl/sandbox/build.py, `extra_visible`): an agent
CLI starts loopctl's MCP launcher (`sys.executable -m loopctl.backends.connector_launch`,
backends/connectors.py) inside the sandbox, whose private /tmp would hide a Python, a venv or a
loopctl checkout that lives under the host's /tmp (a CI job's scratch folder, `uv` or `pipx`
pointed at a temp dir). Each layout here is a real install, and loopctl's side runs from it:
tests/programs/confined_run.py builds the sandbox, and a shell in it runs loopctl's interpreter
the way a CLI would. Each test names the one-line mutants of build.py it kills.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.outside_tmp import under_tmp

import loopctl
from loopctl import sandbox

PROGRAMS = Path(__file__).resolve().parents[1] / "programs"
PY_VERSION = f"python{sys.version_info.major}.{sys.version_info.minor}"
# loopctl's dependencies, where the test's own interpreter finds them (outside /tmp here; if
# this checkout lives under /tmp, bound as loopctl's own sys.path entry, as in production).
DEPENDENCIES = sysconfig.get_paths()["purelib"]

pytestmark = pytest.mark.skipif(
    sandbox.probe()[0] != "bwrap", reason=f"no bwrap sandbox here: {sandbox.probe()[2]}"
)


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A folder directly under /tmp (0755): what the sandbox's private /tmp hides."""
    with under_tmp("own-python") as folder:
        (folder / "work").mkdir()
        (folder / "home").mkdir()
        yield folder


def python_under(prefix: Path) -> tuple[Path, Path]:
    """A Python installed at `prefix` (its binary copied, its standard library linked file by
    file, a site-packages of its own): the interpreter and its site-packages."""
    real = Path(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))
    real_prefix = Path(sys.base_prefix)
    (prefix / "bin").mkdir(parents=True)
    binary = prefix / "bin" / PY_VERSION
    shutil.copy2(real, binary)
    for entry in (real_prefix / "lib").iterdir():  # libpython, whichever way the binary finds it
        if entry.name != PY_VERSION:
            (prefix / "lib" / entry.name).parent.mkdir(exist_ok=True)
            (prefix / "lib" / entry.name).symlink_to(entry)
    stdlib = prefix / "lib" / PY_VERSION
    stdlib.mkdir(parents=True)
    for entry in (real_prefix / "lib" / PY_VERSION).iterdir():
        if entry.name != "site-packages":
            (stdlib / entry.name).symlink_to(entry)
    (stdlib / "site-packages").mkdir()
    return binary, stdlib / "site-packages"


def copy_of_loopctl(into: Path) -> Path:
    """The loopctl under test (a mutant's copy too) as a package in `into`."""
    shutil.copytree(
        Path(loopctl.__file__).parent,
        into / "loopctl",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return into


def editable_finder(site_packages: Path, checkout: Path) -> None:
    """What an editable install in setuptools' strict mode leaves: a `.pth` that installs a
    finder mapping `loopctl` to the checkout. The checkout is on no sys.path entry."""
    package = checkout / "loopctl"
    (site_packages / "_loopctl_editable_finder.py").write_text(
        "import importlib.abc, importlib.util, sys\n"
        "class Finder(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name != 'loopctl':\n"
        "            return None\n"
        f"        init = {str(package / '__init__.py')!r}\n"
        f"        return importlib.util.spec_from_file_location(name, init,"
        f" submodule_search_locations=[{str(package)!r}])\n"
        "def install():\n"
        "    sys.meta_path.append(Finder())\n"
    )
    (site_packages / "__editable__.loopctl.pth").write_text(
        "import _loopctl_editable_finder; _loopctl_editable_finder.install()\n"
    )


def launcher_in_sandbox(python: Path, scratch: Path, network: str) -> dict[str, str]:
    """loopctl's side run by `python` (no PYTHONPATH: it finds loopctl as its install says),
    building the sandbox for scratch/work and starting in it, through a shell as an agent CLI
    would, `python -m loopctl.backends.connector_launch` (given no launch file, it answers its
    usage: it was found and ran). With `network` "proxy" the egress bridge, which loopctl's
    interpreter runs from loopctl's package, is shown too: "none" leaves only `extra_visible`."""
    # The interpreter is named in the environment, not on the command line: a file the command
    # line names is shown on purpose (visible.program_files), as is not the MCP config's.
    script = 'exec "$OWN_PYTHON" -m loopctl.backends.connector_launch'
    spec = {
        "root": str(scratch / "work"),
        "worktree": str(scratch / "work"),
        "env": {
            "HOME": str(scratch / "home"),
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "OWN_PYTHON": str(python),
        },
        "argv": ["/bin/sh", "-c", script],
        "network": network,
    }
    env = {"PATH": "/usr/bin:/bin", "HOME": str(scratch / "home"), "LANG": "C.UTF-8"}
    done = subprocess.run(
        [str(python), str(PROGRAMS / "confined_run.py"), json.dumps(spec)],
        env=env, cwd="/", capture_output=True, text=True, timeout=180, check=False,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize("network", ["none", "proxy"])
def test_a_venv_under_tmp_made_from_a_python_under_tmp_with_an_editable_loopctl(
    scratch: Path, network: str
) -> None:
    """Kills dropping `sys.prefix` (the venv: its pyvenv.cfg, without which the Python in the
    sandbox is not the venv and finds no loopctl), `sys.base_prefix` (the Python the venv's
    `bin/python` links to) and loopctl's own checkout (`parents[2]`: an editable finder maps
    loopctl there, no sys.path entry names it) from `extra_visible`."""
    base, _ = python_under(scratch / "python")
    venv = scratch / "venv"
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site_packages = venv / "lib" / PY_VERSION / "site-packages"
    checkout = copy_of_loopctl(scratch / "checkout")
    editable_finder(site_packages, checkout)
    (site_packages / "dependencies.pth").write_text(f"{DEPENDENCIES}\n")

    ran = launcher_in_sandbox(venv / "bin" / "python", scratch, network)

    assert ran["code"] == 1, ran
    assert "usage: python -m loopctl.backends.connector_launch" in ran["stderr"], ran


@pytest.mark.parametrize("network", ["none", "proxy"])
def test_a_python_run_through_a_link_with_loopctl_on_a_linked_pth_path(
    scratch: Path, network: str
) -> None:
    """Kills dropping the interpreter's own folder (`sys.executable` is the link in tools/, in
    neither prefix) and loopctl's sys.path entries (the `.pth` line names lib-links/lib, a link
    to the folder loopctl lives in: `parents[2]` resolves to the folder, not the link), and the
    `"/"` that keeps them changed to what no path starts with."""
    binary, site_packages = python_under(scratch / "python")
    (scratch / "tools").mkdir()
    (scratch / "tools" / "python3").symlink_to(binary)
    real = copy_of_loopctl(scratch / "real" / "lib")
    (scratch / "lib-links").mkdir()
    (scratch / "lib-links" / "lib").symlink_to(real)
    (site_packages / "loopctl.pth").write_text(f"{scratch / 'lib-links' / 'lib'}\n{DEPENDENCIES}\n")

    ran = launcher_in_sandbox(scratch / "tools" / "python3", scratch, network)

    assert ran["code"] == 1, ran
    assert "usage: python -m loopctl.backends.connector_launch" in ran["stderr"], ran


def test_the_folder_loopctl_is_started_from_stays_hidden(scratch: Path) -> None:
    """Kills the `"/"` filter emptied: `python -c` puts "" first on loopctl's sys.path, which
    is no place loopctl's interpreter lives but the folder it was started from. Under /tmp, and
    not the checkout, that folder is the host's and stays behind the private /tmp."""
    elsewhere = scratch / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text("another project's notes\n")
    spec = {
        "root": str(scratch / "work"),
        "worktree": str(scratch / "work"),
        "env": {"HOME": str(scratch / "home"), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        # Named relative to the worktree: a file the command line names is shown on purpose.
        "argv": ["/bin/sh", "-c", "cat ../elsewhere/notes.txt"],
    }
    driver = f"import runpy, sys; sys.argv = ['confined_run', {json.dumps(spec)!r}]; "
    driver += f"runpy.run_path({str(PROGRAMS / 'confined_run.py')!r}, run_name='__main__')"
    own = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    env = {"PATH": "/usr/bin:/bin", "HOME": str(scratch / "home"), "LANG": "C.UTF-8", **own}
    done = subprocess.run(
        [sys.executable, "-c", driver], env=env, cwd=elsewhere, capture_output=True, text=True,
        timeout=180, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    ran = json.loads(done.stdout)

    assert ran["code"] != 0, ran
    assert "another project" not in ran["stdout"]
    assert "No such file" in ran["stderr"], ran
