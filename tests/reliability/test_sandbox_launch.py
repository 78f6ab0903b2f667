"""How a confined program is started (issue 27): what reaches bwrap as the program runs as
the program, whatever its name; what of the host's /tmp the private /tmp still shows (the
agent's tools on PATH, through links too, loopctl's own install) and nothing more.

Real bwrap, real programs, real folders under /tmp and outside it (`place`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.outside_tmp import Place

from loopctl import process, sandbox
from loopctl.egress import EgressPolicy, NetworkMode

pytestmark = pytest.mark.skipif(
    sandbox.probe()[0] != "bwrap", reason=f"no bwrap sandbox here: {sandbox.probe()[2]}"
)


def test_a_program_found_through_a_path_entry_starting_with_a_dash_runs_as_the_program(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills dropping the `--` that ends bwrap's options: a loop's PATH with a relative entry
    (`-tools`, a project's own folder of scripts) resolves the agent's program to `-tools/hello`,
    which bwrap would otherwise take for an option of its own and refuse to start."""
    worktree = place.base / "work"
    (worktree / "-tools").mkdir(parents=True)
    # A binary, not a script: a shell given `-tools/hello` by a `#!` line takes it for options.
    shutil.copy2(shutil.which("echo") or "/bin/echo", worktree / "-tools" / "hello")
    # shutil.which resolves a relative PATH entry from our own folder: the worktree's.
    monkeypatch.chdir(worktree)
    # No network: no egress bridge in front, whose interpreter would come first instead.
    box = sandbox.make_sandbox(
        root=worktree, worktree=worktree, egress=EgressPolicy(mode=NetworkMode.NONE)
    )
    env = {"PATH": f"-tools{os.pathsep}/usr/bin{os.pathsep}/bin", "HOME": str(place.home)}
    done = process.run(
        ["hello", "ran-as-the-program"], cwd=worktree, env=env, timeout=120, sandbox=box
    )
    assert done.ok, done.output_tail()
    assert "ran-as-the-program" in done.stdout_tail


def test_a_tool_on_the_agents_path_under_tmp_runs_inside(tmp_path: Path) -> None:
    """Kills dropping the PATH entries from what the private /tmp must still show (or reading
    them from another variable, or not only the absolute ones): a CLI installed with
    HOME=/tmp/… keeps its tools in a PATH folder there, and the agent's shell, itself outside
    /tmp, finds them by name. The rest of the host's /tmp stays hidden."""
    tools = tmp_path / "tools" / "bin"
    tools.mkdir(parents=True)
    shutil.copy2(shutil.which("echo") or "/bin/echo", tools / "mytool")
    (tmp_path / "beside").write_text("host file\n")
    worktree = tmp_path / "work"
    worktree.mkdir()
    box = sandbox.make_sandbox(
        root=worktree, worktree=worktree, egress=EgressPolicy(mode=NetworkMode.NONE)
    )
    env = {"PATH": f"{tools}{os.pathsep}/usr/bin{os.pathsep}/bin", "HOME": str(worktree)}
    script = f"mytool found-by-name; cat {tmp_path / 'beside'} || echo beside-hidden"
    done = process.run(["sh", "-c", script], cwd=worktree, env=env, timeout=120, sandbox=box)
    assert done.stdout_tail.split() == ["found-by-name", "beside-hidden"], done.output_tail()


def test_a_linked_path_entry_under_tmp_shows_the_folder_it_leads_to(tmp_path: Path) -> None:
    """Kills the link handling of what the private /tmp must still show turned off (the link
    bound as if it were a folder, or only its own folder put back): a PATH entry under /tmp
    that links to a versioned install (`tools/bin -> ../opt/tool-2.1/bin`), for a tool the
    agent's shell (outside /tmp) runs by name, is shown as the link in its folder and the
    folder it leads to, and the tool starts by either path."""
    install = tmp_path / "opt" / "tool-2.1" / "bin"
    install.mkdir(parents=True)
    shutil.copy2(shutil.which("echo") or "/bin/echo", install / "mytool")
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "bin").symlink_to("../opt/tool-2.1/bin")
    worktree = tmp_path / "work"
    worktree.mkdir()
    box = sandbox.make_sandbox(
        root=worktree, worktree=worktree, egress=EgressPolicy(mode=NetworkMode.NONE)
    )
    path = f"{tmp_path / 'tools' / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin"
    env = {"PATH": path, "HOME": str(worktree)}
    # A launcher that re-executes itself by its resolved path (realpath of argv[0], as
    # node's and Python's do) finds the folder the link leads to, as on the host.
    script = f"mytool found-through-the-link; {install / 'mytool'} found-where-it-leads"
    done = process.run(["sh", "-c", script], cwd=worktree, env=env, timeout=120, sandbox=box)
    expected = ["found-through-the-link", "found-where-it-leads"]
    assert done.stdout_tail.split() == expected, done.output_tail()


def test_a_relative_path_entry_shows_nothing_of_the_hosts_tmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills the PATH entries shown without the absolute-path filter: a relative entry (`bin`,
    resolved from loopctl's own folder under /tmp) would be bound from there onto the same
    relative name inside, that is over the sandbox's `/bin`, putting a host folder of /tmp
    where the agent's system programs are. Only absolute entries are shown."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "host-secret").write_text("from the host's /tmp\n")
    monkeypatch.chdir(tmp_path)
    worktree = tmp_path / "work"
    worktree.mkdir()
    box = sandbox.make_sandbox(
        root=worktree, worktree=worktree, egress=EgressPolicy(mode=NetworkMode.NONE)
    )
    env = {"PATH": f"bin{os.pathsep}/usr/bin{os.pathsep}/bin", "HOME": str(worktree)}
    script = (
        f"for f in /bin/host-secret /usr/bin/host-secret {tmp_path}/bin/host-secret; do"
        ' cat "$f" 2>/dev/null && echo "read $f"; done; /bin/sh -c "echo system-intact"'
    )
    done = process.run(["/bin/sh", "-c", script], cwd=worktree, env=env, timeout=120, sandbox=box)
    assert done.stdout_tail.split() == ["system-intact"], done.output_tail()


LOOPCTL_INSIDE = """
import json, sys
from pathlib import Path
from loopctl import process, sandbox
from loopctl.egress import EgressPolicy, NetworkMode
worktree = Path(sys.argv[1])
box = sandbox.make_sandbox(
    root=worktree, worktree=worktree, egress=EgressPolicy(mode=NetworkMode.NONE)
)
code = "import loopctl; print(loopctl.__file__)"
env = {"PATH": "/usr/bin:/bin", "HOME": str(worktree), "PYTHONPATH": sys.argv[2]}
done = process.run([sys.executable, "-c", code], cwd=worktree, env=env, timeout=120, sandbox=box)
print(json.dumps({"code": done.exit_code, "out": done.stdout_tail, "err": done.stderr_tail}))
"""


def test_loopctl_installed_under_tmp_still_runs_inside(tmp_path: Path) -> None:
    """Kills loopctl's own install left out of what the private /tmp must still show
    (`extra_visible`): a CI job with loopctl under /tmp (a scratch checkout, a venv there) runs
    checks and command agents that import loopctl inside the sandbox; they find it."""
    import loopctl

    copy = tmp_path / "install"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(Path(loopctl.__file__).parent, copy / "loopctl", ignore=ignore)
    worktree = tmp_path / "work"
    worktree.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(worktree), "PYTHONPATH": str(copy)}
    done = subprocess.run(
        [sys.executable, "-c", LOOPCTL_INSIDE, str(worktree), str(copy)],
        capture_output=True, text=True, env=env, cwd=worktree, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    inside = json.loads(done.stdout.strip().splitlines()[-1])
    assert inside["code"] == 0, inside
    assert inside["out"].strip() == str(copy / "loopctl" / "__init__.py")
