"""Homes and tools under /tmp work in the sandbox (issue 24, item 6).

Containers run with an arbitrary uid often have `HOME=/tmp/…`, and install the agent CLIs there.
The sandbox's /tmp is private and empty, so it must put back exactly what the program needs:
the folder a link on PATH leads to (a CLI's package, a virtualenv), the interpreter its `#!`
line names, and its state in HOME, and nothing else of the host's /tmp. The program here is a
command agent installed as CLIs are: a link on PATH into a versioned folder, a module beside it,
its settings in HOME. The canary binds only what was bound before: the program cannot start.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopctl import process, sandbox

pytestmark = pytest.mark.skipif(
    sandbox.probe()[0] != "bwrap", reason=f"no bwrap sandbox here: {sandbox.probe()[2]}"
)

AGENT = """#!{python}
import os, sys
from pathlib import Path
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import helper
print("state", (Path(os.environ["HOME"]) / ".agentrc").read_text().strip())
print("helper", helper.NAME)
for other in os.environ["OTHERS"].split(":"):
    print("other", other, "SEEN" if os.path.exists(other) else "hidden")
"""


@pytest.fixture
def base() -> Iterator[Path]:
    # Directly under /tmp (not pytest's tmp_path, also there but deeper): as a container's is.
    folder = Path(tempfile.mkdtemp(prefix="loopctl-tmphome-", dir="/tmp"))
    sibling = Path(tempfile.mkstemp(prefix="loopctl-sibling-", dir="/tmp")[1])
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        sibling.unlink(missing_ok=True)


def install(base: Path) -> tuple[dict[str, str], Path, list[Path]]:
    """The agent installed under base/opt, linked from base/bin (on PATH), HOME in base/home."""
    package = base / "opt" / "agent-1.0"
    package.mkdir(parents=True)
    (package / "agent.py").write_text(AGENT.format(python=sys.executable))
    (package / "agent.py").chmod(0o755)
    (package / "helper.py").write_text('NAME = "helper beside the program"\n')
    (base / "bin").mkdir()
    (base / "bin" / "agent").symlink_to("../opt/agent-1.0/agent.py")
    home = base / "home"
    home.mkdir()
    (home / ".agentrc").write_text("the agent's own settings\n")
    (base / "secret.txt").write_text("beside the install, not for the agent\n")
    siblings = [base / "secret.txt", *Path("/tmp").glob("loopctl-sibling-*")]
    env = {"HOME": str(home), "PATH": f"{base / 'bin'}:/usr/bin:/bin", "LANG": "C.UTF-8"}
    # Named in the environment, not on the command line: a file argv names is exposed.
    env["OTHERS"] = ":".join(map(str, siblings))
    (base / "work").mkdir()
    (base / "repo").mkdir()
    return env, base / "work", siblings


def test_a_program_installed_under_tmp_runs_and_sees_its_state_and_nothing_else(
    base: Path,
) -> None:
    env, work, siblings = install(base)
    box = sandbox.make_sandbox(root=base / "repo", worktree=work)
    done = process.run(["agent"], cwd=work, env=env, sandbox=box)
    assert done.ok, done.output_tail()
    lines = done.stdout_tail.splitlines()
    assert "state the agent's own settings" in lines
    assert "helper helper beside the program" in lines
    for sibling in siblings:
        assert f"other {sibling} hidden" in lines, lines
    assert not (base / "opt" / "agent-1.0" / "__pycache__").exists()  # read-only there


def test_canary_without_its_install_folder_the_program_cannot_start(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env, work, _ = install(base)
    monkeypatch.setattr(sandbox.visible, "installed", lambda executable, env: [])
    box = sandbox.make_sandbox(root=base / "repo", worktree=work)
    done = process.run(["agent"], cwd=work, env=env, sandbox=box)
    assert not done.ok, done.output_tail()


def test_a_virtualenv_under_tmp_and_its_interpreter_are_put_back(base: Path) -> None:
    """A tool in a virtualenv under /tmp: its `#!` line names the venv's own python (a link
    out of /tmp), and it imports from the venv's site-packages."""
    venv = base / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {Path(sys.executable).parent}\n")
    site = venv / "lib" / "site"
    site.mkdir(parents=True)
    (site / "toolmod.py").write_text('WORD = "from the venv"\n')
    (venv / "bin" / "python").symlink_to(sys.executable)
    tool = venv / "bin" / "tool"
    tool.write_text(
        f"#!{venv / 'bin' / 'python'}\nimport sys\nsys.path.insert(0, {str(site)!r})\n"
        "import toolmod\nprint(toolmod.WORD)\n"
    )
    tool.chmod(0o755)
    (base / "secret.txt").write_text("not for the agent\n")
    (base / "work").mkdir()
    (base / "repo").mkdir()
    env = {"HOME": str(base / "work"), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    box = sandbox.make_sandbox(root=base / "repo", worktree=base / "work")
    code = f"import os; print(os.path.exists({str(base / 'secret.txt')!r}))"
    done = process.run([str(tool)], cwd=base / "work", env=env, sandbox=box)
    assert done.ok, done.output_tail()
    assert done.stdout_tail.strip() == "from the venv"
    peek = process.run([sys.executable, "-c", code], cwd=base / "work", env=env, sandbox=box)
    assert peek.stdout_tail.strip() == "False", peek.output_tail()


def test_a_node_package_under_tmp_finds_the_sibling_package_it_depends_on(base: Path) -> None:
    """npm puts a package's dependencies beside it in `node_modules` (Codex's launcher finds its
    platform binary in `@openai/codex-linux-x64`): the whole `node_modules` is put back, and
    still nothing beside it."""
    modules = base / "npm" / "node_modules"
    package, dependency = modules / "@acme" / "tool", modules / "@acme" / "tool-linux-x64"
    (package / "bin").mkdir(parents=True)
    dependency.mkdir(parents=True)
    (package / "package.json").write_text('{"name": "@acme/tool"}\n')
    (dependency / "package.json").write_text('{"name": "@acme/tool-linux-x64"}\n')
    (dependency / "native.txt").write_text("the platform binary\n")
    launcher = package / "bin" / "tool.py"
    launcher.write_text(
        f"#!{sys.executable}\nimport os\nhere = os.path.dirname(os.path.realpath(__file__))\n"
        "print(open(os.path.join(here, '..', '..', 'tool-linux-x64', 'native.txt')).read())\n"
    )
    launcher.chmod(0o755)
    (modules / ".bin").mkdir()
    (modules / ".bin" / "tool").symlink_to("../@acme/tool/bin/tool.py")
    (base / "npm" / "secret.txt").write_text("beside the install, not for the agent\n")
    (base / "work").mkdir()
    (base / "repo").mkdir()
    env = {"HOME": str(base / "work"), "PATH": f"{modules / '.bin'}:/usr/bin:/bin"}
    box = sandbox.make_sandbox(root=base / "repo", worktree=base / "work")
    done = process.run(["tool"], cwd=base / "work", env=env, sandbox=box)
    assert done.ok, done.output_tail()
    assert done.stdout_tail.strip() == "the platform binary"
    code = f"import os; print(os.path.exists({str(base / 'npm' / 'secret.txt')!r}))"
    peek = process.run([sys.executable, "-c", code], cwd=base / "work", env=env, sandbox=box)
    assert peek.stdout_tail.strip() == "False", peek.output_tail()
