"""Scenario 5: hostile task ids, branch names, titles and agent output stay data.

A `git` wrapper first on PATH records every argv loopctl gives git. Criterion: 0 files outside
the worktree root, 0 git arguments injected, 0 sentinel files created.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from support import repos

PY = sys.executable
REAL_GIT = shutil.which("git") or "/usr/bin/git"
FIXER = Path(__file__).parents[1] / "agents" / "fixer.py"
INJECTIONS = ("--upload-pack", "-oProxyCommand", "ext::", "--output", "core.sshCommand", "-c core")


def hostile(sentinel: Path) -> list[str]:
    touch = f"touch {sentinel}"
    return [
        "../../../../x",
        f"--upload-pack={touch}",
        f"-c core.sshCommand={touch}",
        f"ext::sh -c {touch}",
        "-oProxyCommand=" + touch,
        f"$({touch})",
        f"a;{touch}",
        f"`{touch}`",
        "line\nbreak",
        "nul\u0000byte",
        "ünï-cødé-🚀",
        "x" * 300,
        "--output=/etc/passwd",
        "@{-1}",
        ".git/hooks/pre-commit",
    ]


def options_part(argv: list[str]) -> list[str]:
    """What git may parse as options: everything before `--` or `--end-of-options`."""
    for index, arg in enumerate(argv):
        if arg in ("--", "--end-of-options"):
            return argv[:index]
    return argv


def recorded_argvs(folder: Path) -> list[list[str]]:
    """Every argv the wrapper recorded: per file, records of a count and that many arguments."""
    argvs: list[list[str]] = []
    for record_file in sorted(folder.iterdir()):
        fields = record_file.read_bytes().split(b"\0")
        assert fields.pop() == b"", f"{record_file} ends inside a record"
        while fields:
            count = int(fields.pop(0))
            argvs.append([os.fsdecode(arg) for arg in fields[:count]])
            del fields[:count]
    return argvs


# The real git (PATH holds a recording wrapper in these tests), as a user runs it.
git = functools.partial(repos.git, plain=True, program=REAL_GIT)


def test_hostile_ids_titles_and_bases_stay_data(tmp_path: Path) -> None:
    sentinel = tmp_path / "PWNED"
    recorded = tmp_path / "git-argv"
    recorded.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "git"
    # A shell wrapper, not a Python one: loopctl calls git some 1,800 times here, and a Python
    # start each time cost the suite a minute of CPU. Each call appends one record to the file of
    # its pid (never two writers at once): the argument count, then each argument, NUL-ended.
    wrapper.write_text(
        "#!/bin/sh\n"
        f'printf \'%s\\0\' "$#" "$@" >> {shlex.quote(str(recorded))}/$$\n'
        f'exec {shlex.quote(REAL_GIT)} "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / ".gitignore").write_text("__pycache__/\n")
    (repo / "agents").mkdir()
    (repo / "agents" / "fixer.toml").write_text(
        f'backend = "command"\nargv = {json.dumps([PY, str(FIXER)])}\n'
    )
    names = hostile(sentinel)
    items = [{"id": name, "title": name, "ref": "main"} for name in names]
    items += [{"id": f"base-{n}", "title": "base", "ref": name} for n, name in enumerate(names[:8])]
    check = "import calc, sys; sys.exit(0 if calc.add(2, 3) == 5 else 1)"
    (repo / ".loop" / "loops").mkdir(parents=True)
    (repo / ".loop" / "config.toml").write_text('[defaults]\nmaker = "fixer"\n')
    (repo / ".loop" / "loops" / "hostile.toml").write_text(
        "[tasks]\n"
        f"command = {json.dumps([PY, '-c', f'import json; print(json.dumps({items!r}))'], ensure_ascii=False)}\n"  # noqa: E501
        'id = "{id}"\nbase = "{ref}"\nprompt = "Fix add(). Title: {title}"\n\n'
        f"[checker]\ncommand = {json.dumps([PY, '-B', '-c', check])}\n\n"
        "[budget]\nmax_tasks = 50\nmax_iterations = 1\n"
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "hostile")
    home = tmp_path / "home"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env["LOOPCTL_HOME"] = str(home)
    before = set(tmp_path.parent.iterdir())

    done = subprocess.run(
        [PY, "-m", "loopctl", "run", "hostile", "--once", "--json"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip

    assert "Traceback" not in done.stderr
    assert done.stdout, done.stderr
    outcome = json.loads(done.stdout)["run"]
    statuses = {task["task"]: task["status"] for task in outcome["tasks"]}
    argvs = recorded_argvs(recorded)
    injected = [
        argv
        for argv in argvs
        for arg in options_part(argv)
        # An injected argument is one git would read as an option, a config or a transport:
        # hostile text inside a sanitised branch name or path is just a name.
        if arg.startswith(INJECTIONS)
    ]
    root = home / "worktrees"
    outside = [
        task["worktree"]
        for task in outcome["tasks"]
        if task["worktree"] and not Path(task["worktree"]).resolve().is_relative_to(root.resolve())
    ]
    print(
        f"\nhostile tasks: {len(items)} ({sum(s == 'done' for s in statuses.values())} done);"
        f" git calls {len(argvs)}, injected {len(injected)}; outside the root {len(outside)};"
        f" sentinel {'created' if sentinel.exists() else 'absent'}"
    )
    assert injected == [], [argv[16:] for argv in injected]
    assert outside == []
    assert not sentinel.exists()
    assert set(tmp_path.parent.iterdir()) == before
    # Hostile ids are worked (as sanitised ids); hostile base refs are refused, never used.
    assert sum(status == "done" for status in statuses.values()) >= len(names)
    for task in outcome["tasks"]:
        if task["branch"]:
            ok = subprocess.run(
                [REAL_GIT, "check-ref-format", "--branch", task["branch"]], capture_output=True
            )
            assert ok.returncode == 0, task["branch"]
