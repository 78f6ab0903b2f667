"""The agent sandbox's configuration and behaviour (DESIGN §5 invariant 11), with real bwrap.

The hostile makers are in tests/reliability/test_hostile_agents.py; here: what `[sandbox]` in
config and agent files means, that a run refuses before any worktree exists when no sandbox can
be set up, `network = false`, `loopctl doctor`, and that checks run confined too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import invoke
from support.journal import events
from support.repos import (
    FAST_CHECK,
    PY,
    git_worktrees,
    make_project,
    toml_value,
    write_agent,
    write_config,
)

from loopctl import process, sandbox
from loopctl.definitions import load_project
from loopctl.egress import EgressPolicy, NetworkMode
from loopctl.secrets import build_env

pytestmark = pytest.mark.skipif(
    sandbox.probe()[0] is None, reason=f"no sandbox on this machine: {sandbox.probe()[2]}"
)

INSPECT = r"""
import json, os, socket, sys
from pathlib import Path
out = {"pids": len([p for p in os.listdir("/proc") if p.isdigit()])}
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5).close()
    out["network"] = True
except OSError:
    out["network"] = False
for name, path in (("root", sys.argv[2]), ("tmp", "/tmp/probe")):
    try:
        Path(path).write_text("x")
        out[name] = "written"
    except OSError as exc:
        out[name] = exc.strerror
out["tmpdir"] = os.environ.get("TMPDIR")
print(json.dumps(out))
"""


def run_inside(root: Path, worktree: Path, port: int, **rules: object) -> dict[str, object]:
    box = sandbox.make_sandbox(root=root, worktree=worktree, **rules)  # type: ignore[arg-type]
    done = process.run(
        [PY, "-c", INSPECT, str(port), str(root / "planted")],
        cwd=worktree,
        env=build_env(allow=()),
        timeout=60,
        sandbox=box,
    )
    assert done.ok, done.output_tail()
    return json.loads(done.stdout_tail.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.fixture
def listener() -> object:
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server
    server.close()


def test_a_sandboxed_process_sees_only_its_tree_and_writes_only_its_worktree(
    tmp_path: Path, listener: object
) -> None:
    root, worktree = tmp_path / "repo", tmp_path / "work"
    root.mkdir()
    worktree.mkdir()
    port = listener.getsockname()[1]  # type: ignore[attr-defined]
    seen = run_inside(root, worktree, port)
    assert seen["pids"] <= 3  # bwrap's reaper, python, maybe nothing else
    assert seen["root"] == "Read-only file system"
    assert not (root / "planted").exists()
    assert seen["tmp"] == "written"
    assert not Path("/tmp/probe").exists()
    assert seen["tmpdir"] == "/tmp"
    assert seen["network"] is False  # a network namespace of its own: not the host's loopback


def test_network_none_cuts_the_network_and_open_keeps_the_hosts(
    tmp_path: Path, listener: object
) -> None:
    root, worktree = tmp_path / "repo", tmp_path / "work"
    root.mkdir()
    worktree.mkdir()
    port = listener.getsockname()[1]  # type: ignore[attr-defined]
    none = EgressPolicy(mode=NetworkMode.NONE)
    assert run_inside(root, worktree, port, egress=none)["network"] is False
    opened = EgressPolicy(mode=NetworkMode.OPEN)
    assert run_inside(root, worktree, port, egress=opened)["network"] is True


def test_agent_sandbox_and_project_mode_are_read_and_checked(repo: Path) -> None:
    make_project(repo)
    write_agent(
        repo,
        "maker",
        "fixer.py",
        extra='\n[sandbox]\nwrite = ["~/.npm"]\nread = ["~/.ssh"]\nnetwork = false\n',
    )
    project = load_project(repo)
    agent = project.agent("maker")
    assert agent.sandbox.write == ("~/.npm",)
    assert agent.sandbox.read == ("~/.ssh",)
    assert agent.sandbox.network == "none"  # the old `false` still cuts it
    assert project.config.sandbox.value == "required"

    write_agent(repo, "maker", "fixer.py", extra='\n[sandbox]\nwrite = ["relative/path"]\n')
    write_config(repo, '[defaults]\nmaker = "maker"\n\n[sandbox]\nmode = "sometimes"\n')
    result = invoke_validate(repo)
    assert result.returncode == 2
    assert "agents/maker.toml:" in result.stdout + result.stderr
    assert "give an absolute path or one starting with ~/" in result.stdout + result.stderr
    assert "config.toml:" in result.stdout + result.stderr
    assert "sometimes" in result.stdout + result.stderr


def invoke_validate(repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "loopctl", "validate"], cwd=repo, capture_output=True, text=True, check=False
    )


def test_mode_off_is_warned_by_validate_said_by_every_run_and_recorded(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo)
    write_agent(repo, "maker", "fixer.py")
    write_config(
        repo,
        f'[defaults]\nmaker = "maker"\n\n[conditions]\n"tests green" = {toml_value(FAST_CHECK)}\n'
        '\n[sandbox]\nmode = "off"\n',
    )
    checked = invoke_validate(repo)
    assert checked.returncode == 0
    assert "warning: agents run unconfined" in checked.stdout + checked.stderr
    done = subprocess.run(
        [PY, "-m", "loopctl", "goal", "tests green"],
        cwd=repo, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr.count("warning: agents run unconfined") == 1
    (note,) = [e for e in events(repo, "note") if e.data.get("what") == "sandbox"]
    assert note.data["mode"] == "off"


def test_a_run_with_no_sandbox_refuses_before_any_worktree(repo: Path, tmp_path: Path) -> None:
    """No usable bwrap (here: a PATH and a bundled copy that cannot make a namespace) and the
    default mode: one line saying why and how to fix it, exit 1, no worktree, no agent."""
    make_project(repo)
    marker = tmp_path / "agent-ran"
    write_agent(repo, "maker", "records_prompt.py", marker)
    write_config(
        repo,
        f'[defaults]\nmaker = "maker"\n\n[conditions]\n"tests green" = {toml_value(FAST_CHECK)}\n',
    )
    # A kernel that refuses user namespaces, reproduced for one process: a max of 0 in a
    # user namespace of its own is inherited by everything it starts.
    script = (
        "import sys; from loopctl.cli.app import app;"
        " sys.argv = ['loopctl', 'goal', 'tests green']; app()"
    )
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "sh", "-c",
         f"echo 0 > /proc/sys/user/max_user_namespaces && exec {PY} -c \"{script}\""],
        cwd=repo, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if "max_user_namespaces" in done.stderr and "Permission denied" in done.stderr:
        pytest.skip("this kernel does not let a namespace lower its own user-namespace limit")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert "no sandbox for agents" in lines[0]
    assert 'mode = "off"' in lines[0]
    assert not marker.exists()
    assert [w for w in git_worktrees(repo) if w["worktree"] != str(repo)] == []


def test_checks_run_confined_so_the_code_under_test_cannot_touch_the_checkout(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check runs the maker's code: a calc.py that writes to .loop/ when imported."""
    make_project(repo)
    write_agent(repo, "maker", "fixer.py")
    planted = repo / ".loop" / "planted-by-check"
    evil = (
        f"import pathlib\ntry:\n    pathlib.Path({str(planted)!r}).write_text('x')\n"
        "except OSError:\n    pass\n"
    )
    (repo / "calc.py").write_text(evil + "def add(a, b):\n    return a - b\n")
    from support.repos import commit_all

    commit_all(repo, "evil calc")
    write_config(
        repo,
        f'[defaults]\nmaker = "maker"\n\n[conditions]\n"tests green" = {toml_value(FAST_CHECK)}\n',
    )
    result = invoke(monkeypatch, repo, "goal", "tests green")
    assert result.exit_code in (0, 1), result.output
    assert not planted.exists()


def test_doctor_reports_the_mechanism_and_a_passing_live_probe(repo: Path) -> None:
    done = subprocess.run(
        [PY, "-m", "loopctl", "doctor", "--json"], cwd=repo, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)["doctor"]
    assert report["mode"] == "required"
    assert report["mechanism"] == "bwrap"
    assert {f["name"]: f["ok"] for f in report["probe"]} == {
        "processes": True,
        "checkout": True,
        "worktree": True,
        "credentials": True,
        "umount": True,
        "link": True,
        "limits": True,
        "network": True,
        "remount": True,
        "userns": True,
        "keyring": True,
        "ptrace": True,
    }
    assert "every process outside the sandbox" in report["hidden"]
    assert {limit["name"] for limit in report["limits"]} == {"memory", "pids", "cpu_time", "disk"}


def test_loop_definitions_stay_write_protected_when_working_in_place(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / ".loop").mkdir(parents=True)
    (root / "agents").mkdir()
    (root / "src").mkdir()
    box = sandbox.make_sandbox(root=root, worktree=root)
    code = (
        "from pathlib import Path\n"
        "for p in ('.loop/config.toml', 'agents/x.toml', 'src/ok.py'):\n"
        "    try:\n        Path(p).write_text('x'); print(p, 'written')\n"
        "    except OSError as e:\n        print(p, e.strerror)\n"
    )
    done = process.run(
        [sys.executable, "-c", code], cwd=root, env=dict(os.environ), timeout=60, sandbox=box
    )
    assert done.stdout_tail.splitlines() == [
        ".loop/config.toml Read-only file system",
        "agents/x.toml Read-only file system",
        "src/ok.py written",
    ]


def test_worktree_git_pointers_are_pinned_and_the_object_store_is_layered(
    repo: Path, tmp_path: Path
) -> None:
    """An agent that repoints its worktree's `.git` could aim loopctl's own git at a repository
    it planted; it stays read-only. `git add` works, into this turn's own object layer: the
    repository's objects can be neither changed nor deleted."""
    from support.repos import git

    worktree = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "-b", "loop/x/y", str(worktree))
    objects = repo / ".git" / "objects"
    before = sorted(str(p.relative_to(objects)) for p in objects.rglob("*"))
    layer = tmp_path / "layer"
    box = sandbox.make_sandbox(root=repo, worktree=worktree, objects_layer=layer)
    code = (
        "import shutil, subprocess\nfrom pathlib import Path\n"
        "try:\n    Path('.git').write_text('gitdir: /tmp/evil'); print('.git written')\n"
        "except OSError as e:\n    print('.git', e.strerror)\n"
        "Path('new.txt').write_text('x')\n"
        "print(subprocess.run(['git', 'add', 'new.txt']).returncode)\n"
    )
    done = process.run(
        [sys.executable, "-c", code], cwd=worktree, env=dict(os.environ), timeout=60, sandbox=box
    )
    lines = done.stdout_tail.splitlines()
    assert lines[:2] == [".git Read-only file system", "0"], done.output_tail()
    assert (worktree / ".git").read_text().startswith("gitdir: " + str(repo))
    assert any(p.is_file() for p in (layer / "upper").rglob("*"))  # new.txt's blob
    assert sorted(str(p.relative_to(objects)) for p in objects.rglob("*")) == before

    wipe = (
        f"import pathlib, shutil; shutil.rmtree({str(objects)!r}, ignore_errors=True);"
        f" print(len(list(pathlib.Path({str(objects)!r}).rglob('*'))))"
    )
    done = process.run(
        [sys.executable, "-c", wipe], cwd=worktree, env=dict(os.environ), timeout=60, sandbox=box
    )
    assert done.stdout_tail.strip() == "0", done.output_tail()  # inside, the overlay let it...
    # ...but outside every object is where it was.
    assert sorted(str(p.relative_to(objects)) for p in objects.rglob("*")) == before
    assert git(repo, "fsck", "--no-progress", "--no-dangling", "--strict").strip() == ""
    # After the turn the overlay's scratch folder, which the kernel leaves mode 000 (an
    # unprivileged user's `rm -r` of the run folder would stop there), is gone: only the new
    # objects stay, as evidence.
    box.discard_scratch()
    assert sorted(os.listdir(layer)) == ["upper"]


def test_a_program_the_argv_names_under_tmp_stays_readable(tmp_path: Path) -> None:
    """The private /tmp hides the host's temporary files, not the agent's own program: a script
    an agent definition names there (and the module beside it) still runs."""
    root, worktree, tools = tmp_path / "repo", tmp_path / "work", tmp_path / "tools"
    for folder in (root, worktree, tools):
        folder.mkdir()
    (tools / "helper.py").write_text("ANSWER = 42\n")
    (tools / "agent.py").write_text("import helper\nprint(helper.ANSWER)\n")
    (tmp_path / "secret.txt").write_text("not for the agent\n")
    box = sandbox.make_sandbox(root=root, worktree=worktree)
    code = f"print(open({str(tmp_path / 'secret.txt')!r}).read())"
    ran = process.run(
        [sys.executable, str(tools / "agent.py")], cwd=worktree, env=dict(os.environ),
        timeout=60, sandbox=box,
    )  # fmt: skip
    peeked = process.run(
        [sys.executable, "-c", code], cwd=worktree, env=dict(os.environ), timeout=60, sandbox=box
    )
    assert ran.ok, ran.output_tail()
    assert ran.stdout_tail.strip() == "42"
    assert not peeked.ok  # the rest of the host's /tmp stays hidden
    assert "No such file or directory" in peeked.stderr_tail
