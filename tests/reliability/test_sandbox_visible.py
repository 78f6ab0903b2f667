"""What of the host's /tmp the private /tmp still shows for the program an agent runs
(loopctl/sandbox/visible.py), shown by real programs under bubblewrap (issue 27): the
interpreter a `#!/usr/bin/env` line finds, a first line that names no interpreter, and what the
command line names that is no file. Each test names the one-line mutants of visible.py it
kills.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopctl import process, sandbox
from loopctl.egress import EgressPolicy, NetworkMode

PY = sys.executable

pytestmark = pytest.mark.skipif(
    sandbox.probe()[0] != "bwrap", reason=f"no bwrap sandbox here: {sandbox.probe()[2]}"
)


@pytest.fixture
def base() -> Iterator[Path]:
    """A folder directly under /tmp (0755), as a container's HOME=/tmp/… is."""
    with tempfile.TemporaryDirectory(prefix="loopctl-visible-", dir="/tmp") as scratch:
        folder = Path(scratch)
        folder.chmod(0o755)
        (folder / "work").mkdir()
        yield folder


def box_for(base: Path) -> sandbox.Sandbox:
    worktree = base / "work"
    return sandbox.make_sandbox(
        root=worktree, worktree=worktree, egress=EgressPolicy(mode=NetworkMode.NONE)
    )


@pytest.mark.parametrize("line", ["/usr/bin/env myinterp", "/usr/bin/env -S LANG=C.UTF-8 myinterp"])
def test_an_env_line_finds_its_interpreter_through_a_link_under_tmp(base: Path, line: str) -> None:
    """Kills the `#!/usr/bin/env NAME` branch turned off (or `env` changed), the options and
    assignments it skips (`-`, `=`) changed or emptied, the agent's PATH read from another
    variable, and the interpreter not followed: a tool under /tmp whose first line runs
    `myinterp` from PATH, a link there into a language install elsewhere under /tmp (the
    folder PATH names is shown anyway; the install it leads to only through this lookup)."""
    lang = base / "lang" / "bin"
    lang.mkdir(parents=True)
    (lang / "myinterp").write_text(f'#!/bin/sh\nexec {PY} "$@"\n')
    (lang / "myinterp").chmod(0o755)
    (base / "bin").mkdir()
    (base / "bin" / "myinterp").symlink_to("../lang/bin/myinterp")
    tool = base / "tool" / "run-me"
    tool.parent.mkdir()
    tool.write_text(f"#!{line}\nprint('the tool ran')\n")
    tool.chmod(0o755)
    env = {"HOME": str(base / "work"), "PATH": f"{base / 'bin'}:/usr/bin:/bin"}

    done = process.run([str(tool)], cwd=base / "work", env=env, timeout=120, sandbox=box_for(base))

    assert done.ok, done.output_tail()
    assert done.stdout_tail.strip() == "the tool ran"


def test_a_first_line_that_is_not_utf8_still_runs_the_program(base: Path) -> None:
    """Kills the `replace` error handler changed: a `#!` line with a byte that is not UTF-8 (a
    Latin-1 argument) made building the sandbox raise, and the agent never started."""
    tool = base / "tool"
    # echo runs it: it prints its Latin-1 argument and the script's path.
    tool.write_bytes(b"#!/bin/echo caf\xe9\n")
    tool.chmod(0o755)
    env = {"HOME": str(base / "work"), "PATH": "/usr/bin:/bin"}

    done = process.run([str(tool)], cwd=base / "work", env=env, timeout=120, sandbox=box_for(base))

    assert done.ok, done.output_tail()
    assert done.stdout_tail.split()[-1] == str(tool)


# Builds the sandbox for a program and runs it, in a process of its own: a build that never
# ends is then seen as one (the test waits far longer than a build takes, and says so).
START = """
import sys
from pathlib import Path
from loopctl import process, sandbox
from loopctl.egress import EgressPolicy, NetworkMode
worktree = Path(sys.argv[1])
box = sandbox.make_sandbox(
    root=worktree, worktree=worktree, egress=EgressPolicy(mode=NetworkMode.NONE)
)
env = {"HOME": str(worktree), "PATH": "/usr/bin:/bin"}
done = process.run([sys.argv[2]], cwd=worktree, env=env, timeout=60, sandbox=box)
print("finished", done.ok)
"""


@pytest.mark.parametrize("first", ["#!", "#!  ", "#!{self}"], ids=["bare", "blank", "itself"])
def test_a_first_line_that_names_no_usable_interpreter_fails_to_start_and_nothing_more(
    base: Path, first: str
) -> None:
    """Kills the empty `#!` check turned off (an IndexError while building the sandbox) and the
    interpreter walk's `seen` guard turned off or never filled: a script whose `#!` names
    itself sent the walk round forever, and the agent neither started nor failed. Each fails
    to start, as it would outside the sandbox, and loopctl says so."""
    tool = base / "tool"
    tool.write_text(first.format(self=tool) + "\nprint('ran')\n")
    tool.chmod(0o755)
    import loopctl

    own = str(Path(loopctl.__file__).resolve().parents[1])  # this loopctl (a mutant's copy)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([own, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [PY, "-c", START, str(base / "work"), str(tool)], capture_output=True, text=True,
        env=env, cwd=base / "work", timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["finished", "False"], done.stdout + done.stderr


def test_a_folder_or_a_missing_file_the_command_line_names_shows_nothing_beside_it(
    base: Path,
) -> None:
    """Kills the `is_file` check on what the command line names turned off: a folder
    (`--add-dir /tmp/…/data`) or a file that does not exist there would put back the whole
    folder around it, with a host file beside it. A file the command line names still is."""
    (base / "shared" / "data").mkdir(parents=True)
    (base / "shared" / "secret.txt").write_text("beside the folder, not for the agent\n")
    (base / "gone").mkdir()
    (base / "gone" / "secret.txt").write_text("beside a missing file, not for the agent\n")
    (base / "named").mkdir()
    (base / "named" / "config.json").write_text("{}\n")
    # The files beside are named in the environment: a file the command line names is shown.
    code = (
        "import json, os, sys; names = sys.argv[1:] + os.environ['PEEK'].split(':');"
        " print(json.dumps([os.path.exists(p) for p in names]))"
    )
    args = [str(base / "shared" / "data"), str(base / "gone" / "missing.txt")]
    args += [str(base / "named" / "config.json")]
    peek = [str(base / "shared" / "secret.txt"), str(base / "gone" / "secret.txt")]
    env = {"HOME": str(base / "work"), "PATH": "/usr/bin:/bin", "PEEK": ":".join(peek)}

    done = process.run(
        [PY, "-c", code, *args], cwd=base / "work", env=env, timeout=120,
        sandbox=box_for(base),
    )  # fmt: skip

    assert done.ok, done.output_tail()
    seen = json.loads(done.stdout_tail.strip().splitlines()[-1])
    assert seen == [False, False, True, False, False]


READS_ITS_PACKAGE = """#!{python}
import os, sys
here = os.path.dirname(os.path.realpath(sys.argv[0]))
print(open(os.path.join(here, "..", "lib", "words.txt")).read().strip())
"""


def node_package(package: Path, words: str) -> Path:
    """A package folder with its manifest at the top (`package.json`), an empty `bin/` and
    `lib/words.txt` holding `words`, as a tool installed by npm is laid out."""
    (package / "bin").mkdir(parents=True)
    (package / "lib").mkdir()
    (package / "package.json").write_text('{"name": "tool"}\n')
    (package / "lib" / "words.txt").write_text(f"{words}\n")
    return package


def test_a_package_reached_through_a_linked_path_folder_is_put_back_whole(base: Path) -> None:
    """Kills the resolved path left out of the walk (`hops.append(realpath)` dropped): a PATH
    folder under /tmp that is a link into a package (`tools/bin -> ../opt/tool-2.1/bin`, its
    manifest at the top) names the program by a path whose own folders hold no manifest; only
    the resolved path finds the package, whose `lib/` the program reads."""
    package = node_package(base / "opt" / "tool-2.1", "the package's own words")
    (package / "bin" / "tool").write_text(READS_ITS_PACKAGE.format(python=PY))
    (package / "bin" / "tool").chmod(0o755)
    (base / "tools").mkdir()
    (base / "tools" / "bin").symlink_to("../opt/tool-2.1/bin")
    env = {"HOME": str(base / "work"), "PATH": f"{base / 'tools' / 'bin'}:/usr/bin:/bin"}

    done = process.run(["tool"], cwd=base / "work", env=env, timeout=120, sandbox=box_for(base))

    assert done.ok, done.output_tail()
    assert done.stdout_tail.strip() == "the package's own words"


READS_THROUGH_ITS_LINK = """#!{python}
import os, sys
link = os.readlink(sys.argv[0])  # one step: where the PATH link says the package is
here = os.path.dirname(os.path.join(os.path.dirname(sys.argv[0]), link))
print(open(os.path.join(here, "..", "lib", "words.txt")).read().strip())
"""


def test_every_link_on_the_way_to_the_program_puts_its_package_back(base: Path) -> None:
    """Kills the links between the one run and the file it leads to left out of the walk
    (`hops.append(...)` in the link loop dropped): `bin/tool -> ../pkg/bin/tool`, itself a link
    into a store (`../../store/tool`), as pnpm lays packages out; the program finds its
    package through the first link, and that package (its manifest at the top) is put back."""
    package = node_package(base / "pkg", "found through the first link")
    (base / "store").mkdir()
    (base / "store" / "tool").write_text(READS_THROUGH_ITS_LINK.format(python=PY))
    (base / "store" / "tool").chmod(0o755)
    (package / "bin" / "tool").symlink_to("../../store/tool")
    (base / "bin").mkdir()
    (base / "bin" / "tool").symlink_to("../pkg/bin/tool")
    env = {"HOME": str(base / "work"), "PATH": f"{base / 'bin'}:/usr/bin:/bin"}

    done = process.run(["tool"], cwd=base / "work", env=env, timeout=120, sandbox=box_for(base))

    assert done.ok, done.output_tail()
    assert done.stdout_tail.strip() == "found through the first link"


@pytest.mark.parametrize("target", ["absolute", "relative", "chain"])
def test_a_path_folder_below_a_linked_folder_under_tmp_starts_the_agent(
    base: Path, target: str
) -> None:
    """A link above the place shown, not the place itself: HOME under /tmp with `~/.local`
    linked into a dotfiles folder, and `~/.local/bin` on PATH. bwrap made the mount point by
    walking the spelled path from its new root, where the link leads nowhere yet: it stopped
    ("Can't mkdir"), and no agent started at all (visible.through_links). "chain": the link
    leads through a second one (`links/dot -> ../dotfiles`), whose folder must be shown too:
    kills the walk not restarted from `/`, or not followed into a link's target."""
    tools = base / "dotfiles" / "local" / "bin"
    tools.mkdir(parents=True)
    (tools / "mytool").write_text("#!/bin/sh\necho the tool behind the linked folder ran\n")
    (tools / "mytool").chmod(0o755)
    home = base / "home"
    home.mkdir()
    linked = {
        "absolute": tools.parent,
        "relative": Path("../dotfiles/local"),
        "chain": base / "links" / "dot" / "local",
    }[target]
    (base / "links").mkdir()
    (base / "links" / "dot").symlink_to("../dotfiles")
    (home / ".local").symlink_to(linked)
    env = {"HOME": str(home), "PATH": f"{home / '.local' / 'bin'}:/usr/bin:/bin"}

    done = process.run(["mytool"], cwd=base / "work", env=env, timeout=120, sandbox=box_for(base))

    assert done.ok, done.output_tail()
    assert done.stdout_tail.strip() == "the tool behind the linked folder ran"


# Run as root in a mount namespace of its own (`unshare --mount`), on a fresh, empty /tmp of
# its own: a package manifest in /tmp itself (someone ran `npm init` there), and a tool
# installed below it, run through a link on PATH. Nothing of the host's /tmp is touched.
IN_NAMESPACE = r"""
import ctypes, os, sys
from pathlib import Path
libc = ctypes.CDLL(None, use_errno=True)
if libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, b"mode=1777") != 0:
    raise OSError(ctypes.get_errno(), "mount tmpfs on /tmp")
Path("/tmp/package.json").write_text('{"name": "scratch"}\n')
install = Path("/tmp/x/opt/tool")
install.mkdir(parents=True)
(install / "helper.py").write_text("WORD = 'the helper beside the tool'\n")
tool = install / "tool.py"
tool.write_text(
    f"#!{sys.executable}\nimport os, sys\n"
    "sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))\n"
    "import helper\nprint(helper.WORD)\n"
)
tool.chmod(0o755)
Path("/tmp/x/bin").mkdir()
Path("/tmp/x/bin/tool").symlink_to("../opt/tool/tool.py")
Path("/tmp/x/work").mkdir()
from loopctl import process, sandbox
from loopctl.egress import EgressPolicy, NetworkMode
work = Path("/tmp/x/work")
box = sandbox.make_sandbox(root=work, worktree=work, egress=EgressPolicy(mode=NetworkMode.NONE))
env = {"HOME": str(work), "PATH": "/tmp/x/bin:/usr/bin:/bin"}
done = process.run(["tool"], cwd=work, env=env, timeout=120, sandbox=box)
print(done.ok, done.stdout_tail.strip() or done.stderr_tail.strip())
"""


def test_a_manifest_in_tmp_itself_never_makes_tmp_the_install_folder() -> None:
    """Kills the walk up from an installed file not stopped at the temp root (its guard
    turned off): a `package.json` in /tmp itself would make /tmp the install folder of every
    program below it without a manifest of its own, and /tmp is never put back whole, so the
    tool could not start. Root only: a /tmp of the test's own, in a mount namespace."""
    if os.geteuid() != 0 or not Path("/usr/bin/unshare").exists():
        pytest.skip("needs root and unshare(1) for a /tmp of the test's own")
    import loopctl

    own = str(Path(loopctl.__file__).resolve().parents[1])  # this loopctl (a mutant's copy)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([own, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        ["/usr/bin/unshare", "--mount", "--propagation", "private", PY, "-c", IN_NAMESPACE],
        capture_output=True, text=True, env=env, cwd="/", timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "True the helper beside the tool", done.stdout + done.stderr
