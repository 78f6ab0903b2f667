"""A src-layout project installed with `pip install -e .` into its checkout's venv: the check
imports the worktree's code, not the main checkout's (issue 23, items 1-3).

Everything is real: the venv, pip's PEP 660 editable install (setuptools' own layout
detection decides between a `.pth` entry and a finder module), loopctl as a subprocess, and
the fake maker a real process in the sandbox."""

from __future__ import annotations

import json
import site
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import assert_clean_exit, run_loopctl
from support.journal import events
from support.repos import commit_all, git, make_repo, write_agent, write_config

from loopctl.checks.import_roots import (
    checkout_import_roots,
    checkout_program,
    import_roots,
    redirected_env,
    site_folders,
)

PIP_ARGS = ("--no-index", "-e")
CORE = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TEST = "from srcpkg.core import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
PYPROJECT = """\
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "srcpkg"
version = "0.1"

[tool.setuptools.packages.find]
where = ["src"]
"""


def make_venv(repo: Path) -> Path:
    """`repo/.venv` with pytest, pip and setuptools lent from loopctl's own environment (so
    no download is needed), and `repo` installed into it with `pip install -e .`."""
    venv = repo / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    ours = [p for p in site.getsitepackages() if Path(p).is_dir()]
    theirs = site_folders(python)
    assert theirs, "the new venv has a site-packages folder"
    (theirs[0] / "_lent_tools.pth").write_text("\n".join(ours) + "\n")
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-build-isolation",
            "--no-deps",
            *PIP_ARGS,
            str(repo),
        ],
        check=True,
        capture_output=True,
    )
    return python


@pytest.fixture
def src_project(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "proj")
    (repo / "src" / "srcpkg").mkdir(parents=True)
    (repo / "src" / "srcpkg" / "__init__.py").write_text("")
    (repo / "src" / "srcpkg" / "core.py").write_text(CORE)
    (repo / "tests").mkdir()
    (repo / "tests" / "test_core.py").write_text(TEST)
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (repo / ".gitignore").write_text(".venv/\n__pycache__/\n*.egg-info/\nbuild/\n")
    make_venv(repo)
    return repo


def configure(repo: Path, script: str, check: str) -> None:
    write_agent(repo, "maker", script)
    write_config(
        repo, f'version = 1\n\n[defaults]\nmaker = "maker"\n\n[conditions]\n"fixed" = {check}\n'
    )
    commit_all(repo, "srcpkg with a bug in add()")


VENV_CHECK = '[".venv/bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider"]'


def test_the_editable_install_points_into_the_checkout(src_project: Path) -> None:
    python = src_project / ".venv" / "bin" / "python"
    roots = [
        r for site_dir in site_folders(python) for r in checkout_import_roots(site_dir, src_project)
    ]
    assert roots == [(src_project / "src").resolve()]
    # And it really does: the venv's Python imports the checkout's src/ from anywhere.
    where = subprocess.run(
        [str(python), "-c", "import srcpkg.core; print(srcpkg.core.__file__)"],
        cwd="/",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(where).resolve() == (src_project / "src" / "srcpkg" / "core.py").resolve()


def test_the_override_makes_the_worktree_win(src_project: Path, tmp_path: Path) -> None:
    worktree = tmp_path / "wt"
    git(src_project, "add", "-A")
    git(src_project, "commit", "-qm", "base")
    git(src_project, "worktree", "add", "-q", str(worktree))
    (worktree / "src" / "srcpkg" / "core.py").write_text(FIXED)
    argv = checkout_program(
        (".venv/bin/python", "-c", "import srcpkg.core as c; print(c.add(2, 3))"),
        src_project,
        worktree,
    )
    assert argv[0] == str(src_project / ".venv" / "bin" / "python")
    env = {"PATH": "/usr/bin:/bin"}
    roots = import_roots(argv, src_project, worktree, env)
    assert roots.worktree_entries == ((worktree / "src"),)
    plain = subprocess.run(list(argv), cwd=worktree, env=env, capture_output=True, text=True)
    fixed = subprocess.run(
        list(argv),
        cwd=worktree,
        env=redirected_env(roots, env, src_project),
        capture_output=True,
        text=True,
    )
    assert plain.stdout.strip() == "-1"  # without loopctl's override: the checkout's code
    assert fixed.stdout.strip() == "5"


def test_a_fix_made_in_the_worktree_passes_its_check(src_project: Path) -> None:
    configure(src_project, "fixes_src.py", VENV_CHECK)

    done = run_loopctl(src_project, "goal", "fixed", timeout=120)

    assert_clean_exit(done, 0)
    assert "return a + b" in git(src_project, "show", "loop/goal/fixed:src/srcpkg/core.py")
    assert (src_project / "src" / "srcpkg" / "core.py").read_text() == CORE


def test_a_broken_base_fixed_only_in_the_checkout_does_not_already_hold(src_project: Path) -> None:
    configure(src_project, "deletes_the_failing_test.py", VENV_CHECK)
    (src_project / "src" / "srcpkg" / "core.py").write_text(FIXED)  # uncommitted, main checkout

    done = run_loopctl(src_project, "goal", "fixed", "--max-iterations", "1", timeout=120)

    assert done.returncode != 0
    assert "already holds" not in done.stdout
    assert [
        e for e in events(src_project, "note") if e.data.get("what") == "goal_already_holds"
    ] == []


@pytest.mark.parametrize(
    "how",
    ["--check", "conditions", "builtin"],
)
def test_weakening_the_failing_test_is_refused_through_every_kind_of_check(
    src_project: Path, how: str
) -> None:
    configure(src_project, "deletes_the_failing_test.py", VENV_CHECK)
    if how == "--check":
        args = [
            "goal",
            "tests pass",
            "--check",
            ".venv/bin/python -m pytest -q -p no:cacheprovider",
        ]
    elif how == "conditions":
        args = ["goal", "fixed"]
    else:
        args = ["goal", "tests green"]

    done = run_loopctl(src_project, *args, "--max-iterations", "1", timeout=120)

    assert done.returncode == 1, done.stdout + done.stderr
    finished = events(src_project, "task_finished")[-1]
    assert finished.data["status"] != "done"
    assert "tests/test_core.py" in done.stdout + str(finished.data.get("reason"))


def test_dry_run_says_which_source_tree_the_check_imports(src_project: Path) -> None:
    configure(src_project, "fixes_src.py", VENV_CHECK)

    done = run_loopctl(src_project, "goal", "fixed", "--dry-run")

    assert_clean_exit(done, 0)
    assert "finds this project in the main checkout (src)" in done.stdout
    assert "worktree's src first on PYTHONPATH" in done.stdout


def test_validate_and_doctor_say_which_source_tree_a_check_imports(src_project: Path) -> None:
    configure(src_project, "fixes_src.py", VENV_CHECK)

    text = run_loopctl(src_project, "validate")
    as_json = run_loopctl(src_project, "validate", "--json")
    doctor = run_loopctl(src_project, "doctor", "--json", timeout=120)

    assert_clean_exit(text, 0)
    said = "finds this project in the main checkout (src); loopctl puts the worktree's src first"
    assert said in text.stdout
    assert said in json.loads(as_json.stdout)["validation"]["imports"][0]
    assert said in json.loads(doctor.stdout)["doctor"]["imports"][0], doctor.stderr


def test_an_agent_turn_imports_the_worktrees_code_too(src_project: Path) -> None:
    # The maker runs the checkout's venv itself, as an agent running `pytest` would.
    configure(src_project, "fixes_src_and_imports.py", VENV_CHECK)

    done = run_loopctl(src_project, "goal", "fixed")

    assert_clean_exit(done, 0)
    refs = git(src_project, "for-each-ref", "--format=%(refname:short)", "refs/heads/loop/")
    (branch,) = refs.split()
    imported = Path(git(src_project, "show", f"{branch}:imported.txt").strip())
    # The worktree's src/, not the checkout's (which still holds the bug).
    assert imported.parts[-3:] == ("src", "srcpkg", "core.py"), imported
    assert not imported.is_relative_to(src_project.resolve()), imported
