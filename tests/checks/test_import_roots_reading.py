"""What a check run in a task's worktree imports, read from the files an install leaves (issue 19):
each kind of entry in a venv's site-packages (a `.pth` line, an editable finder module, an
editable distribution's `direct_url.json`), each way a command names its Python (a path, PATH,
a `#!` line, `env`), the user's own PYTHONPATH, and what is left alone (a Python outside a venv,
an in-place run, files that are not an install's).

Fast and real: venvs made with `python -m venv --without-pip` (a fraction of a second), the
install's files written by hand as pip and the backends write them (the real installs are in
test_editable_installs.py and test_editable_backends.py), real git worktrees, and the venv's
own Python run to show which tree it imports. Each test runs in a second or two, so the
mutation run of checks/import_roots.py (bench/mutation.py `import-roots`) runs these first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.outside_tmp import Place
from support.repos import commit_all, git, make_repo

from loopctl.checks.import_roots import (
    agent_env,
    checkout_note,
    checkout_program,
    describe,
    import_roots,
    redirected_env,
    site_folders,
)

BROKEN = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
WHICH = "import pkg; print(pkg.__file__)"
ENV = {"PATH": "/usr/bin:/bin"}
VERSION = f"python{sys.version_info.major}.{sys.version_info.minor}"
REDIRECTED = "finds this project in the main checkout (src); loopctl puts the worktree's src first"


@dataclass(frozen=True)
class Project:
    checkout: Path
    worktree: Path  # a linked worktree whose src/pkg holds the fix

    @property
    def venv(self) -> Path:
        return self.checkout / ".venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def site(self) -> Path:
        return self.venv / "lib" / VERSION / "site-packages"


def venv(where: Path) -> Path:
    """A real venv at `where` (no pip: nothing is installed), and its site-packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    return where / "lib" / VERSION / "site-packages"


def project(base: Path, *, with_venv: bool = True, editable: bool = True) -> Project:
    """A checkout with src/pkg (a bug in add), its worktree (the fix), and its ignored `.venv`
    where `pip install -e .` left a PEP 660 `.pth` line naming the checkout's src/."""
    checkout = make_repo(base.resolve() / "proj")
    (checkout / "src" / "pkg").mkdir(parents=True)
    (checkout / "src" / "pkg" / "__init__.py").write_text(BROKEN)
    (checkout / ".gitignore").write_text(".venv/\n__pycache__/\n")
    commit_all(checkout, "pkg with a bug")
    worktree = base.resolve() / "wt"
    git(checkout, "worktree", "add", "-q", str(worktree))
    (worktree / "src" / "pkg" / "__init__.py").write_text(FIXED)
    made = Project(checkout, worktree)
    if with_venv:
        venv(made.venv)
        if editable:
            (made.site / "__editable__.pkg-0.1.pth").write_text(f"{checkout / 'src'}\n")
    return made


def imported(argv: list[str], env: dict[str, str], cwd: Path) -> Path:
    """The file `pkg` is imported from when `argv` (which prints it) runs with `env`."""
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip())


def script(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    path.chmod(0o755)
    return path


def test_a_pth_file_is_read_as_python_reads_it(place: Place) -> None:
    # Where users keep checkouts too, not only under /tmp.
    p = project(place.base)
    (p.site / "__editable__.pkg-0.1.pth").write_text(
        f"# a comment\nimport os\nimport\tos\n{p.checkout / 'src'}\n"
    )
    argv = [str(p.python), "-c", WHICH]

    roots = import_roots(argv, p.checkout, p.worktree, ENV)

    # Comments and `import` lines name no folder: only the path line is an import root.
    assert roots.checkout_entries == (p.checkout / "src",)
    assert roots.worktree_entries == (p.worktree / "src",)
    assert imported(argv, ENV, p.worktree) == p.checkout / "src" / "pkg" / "__init__.py"
    redirected = redirected_env(roots, ENV, p.checkout)
    assert imported(argv, redirected, p.worktree) == p.worktree / "src" / "pkg" / "__init__.py"


def test_a_link_loop_an_install_file_names_is_passed_over(tmp_path: Path) -> None:
    """A .pth line, relative or absolute, a finder's folder and an editable project that lead
    into a loop of links name no import root, and the check still runs (on 3.11 resolving a
    loop raised RuntimeError, which ended loopctl with a traceback)."""
    p = project(tmp_path, editable=False)
    (p.checkout / "loop-a").symlink_to(p.checkout / "loop-b")
    (p.checkout / "loop-b").symlink_to(p.checkout / "loop-a")
    relative = os.path.relpath(p.checkout / "loop-a", p.site)
    (p.site / "loops.pth").write_text(
        f"{p.checkout / 'loop-a'}\n{relative}\n{p.checkout / 'src'}\n"
    )
    (p.site / "__editable___loop_finder.py").write_text(
        f"MAPPING = {{'x': {str(p.checkout / 'loop-b' / 'x')!r}}}\n"
    )

    roots = import_roots([str(p.python)], p.checkout, p.worktree, ENV)

    assert roots.checkout_entries == (p.checkout / "src",)


def test_files_that_are_not_utf8_too_large_or_not_python_are_passed_over(tmp_path: Path) -> None:
    p = project(tmp_path, editable=False)
    # A Latin-1 comment does not hide the line after it.
    (p.site / "latin.pth").write_bytes(b"# caf\xe9\n" + f"{p.checkout / 'src'}\n".encode())
    # Larger than an install's: not read, whatever it names.
    padding = "#" * (1 << 20) + "\n"
    (p.site / "huge.pth").write_text(f"{p.checkout / 'big'}\n{padding}")
    (p.site / "__editable___huge_finder.py").write_text(
        f"MAPPING = {{'big': {str(p.checkout / 'bigger' / 'big')!r}}}\n{padding}"
    )
    # Finders that are not Python: skipped, not a crash.
    (p.site / "__editable___broken_finder.py").write_text(
        f"MAPPING = {{'x': {str(p.checkout / 'broken' / 'x')!r}\ndef (:\n"
    )
    (p.site / "__editable___nul_finder.py").write_bytes(
        f"MAPPING = {{'x': {str(p.checkout / 'nul' / 'x')!r}}}\0\n".encode()
    )

    roots = import_roots([str(p.python)], p.checkout, p.worktree, ENV)

    assert roots.checkout_entries == (p.checkout / "src",)


def test_a_finder_module_names_the_folders_its_packages_and_modules_import_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = project(tmp_path, editable=False)
    c = p.checkout
    # loopctl runs in the checkout: a relative string read as a path would name it.
    monkeypatch.chdir(c)
    # editables' finder (hatchling's exact dev mode): a package by its __init__.py, a module
    # by its file; names and multi-line text are not paths.
    (p.site / "_editable_impl_pkg.py").write_text(
        "from editables.redirector import RedirectingFinder as F\n"
        "F.install()\n"
        f"F.map_module('pkg', {str(c / 'lib' / 'pkg' / '__init__.py')!r})\n"
        f"F.map_module('mod', {str(c / 'other' / 'mod.py')!r})\n"
        f"NOTE = {str(c / 'docs') + chr(10) + str(c / 'notes')!r}\n"
    )
    # setuptools' finder: a package by its folder.
    (p.site / "__editable___deep_0_1_finder.py").write_text(
        f"MAPPING = {{'deep': {str(c / 'deep' / 'deep')!r}}}\n"
    )
    # A module that is no finder names a path too: it is not read.
    (p.site / "settings.py").write_text(f"DOCS = {str(c / 'site' / 'conf.py')!r}\n")

    roots = import_roots([str(p.python)], c, p.worktree, ENV)

    assert sorted(roots.checkout_entries) == [c / "deep", c / "lib", c / "other"]
    assert sorted(roots.worktree_entries) == [p.worktree / n for n in ("deep", "lib", "other")]


def test_only_an_editable_distributions_direct_url_names_its_project(tmp_path: Path) -> None:
    p = project(tmp_path, editable=False)
    c = p.checkout
    (c / "srcproj" / "src").mkdir(parents=True)
    (c / "flat").mkdir()

    def dist(name: str, data: object) -> None:
        folder = p.site / name
        folder.mkdir()
        (folder / "METADATA").write_text("Metadata-Version: 2.1\n")
        if data is not None:
            (folder / "direct_url.json").write_text(json.dumps(data))

    editable = {"dir_info": {"editable": True}}
    dist("srcproj-0.1.dist-info", {"url": (c / "srcproj").as_uri(), **editable})
    # A flat project (no src/) whose name has "editable" in it: the project's top.
    dist("editable_flat-0.1.dist-info", {"url": (c / "flat").as_uri(), **editable})
    dist("plain-1.0.dist-info", None)  # installed from an index: no direct_url.json
    dist("listy-1.0.dist-info", [])
    dist("copied-1.0.dist-info", {"url": (c / "copied").as_uri(), "dir_info": {}})
    # Not a distribution's metadata, whatever it holds.
    (p.site / "notes").mkdir()
    (p.site / "notes" / "direct_url.json").write_text(
        json.dumps({"url": (c / "notes").as_uri(), **editable})
    )

    roots = import_roots([str(p.python)], c, p.worktree, ENV)

    assert sorted(roots.checkout_entries) == [c / "flat", c / "srcproj" / "src"]


def test_a_direct_url_without_a_path_is_passed_over_even_without_a_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = project(tmp_path)
    folder = p.site / "nopath-0.1.dist-info"
    folder.mkdir()
    (folder / "direct_url.json").write_text(
        json.dumps({"url": "file:", "dir_info": {"editable": True}})
    )
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()  # a relative path cannot be resolved any more

    roots = import_roots([str(p.python)], p.checkout, p.worktree, ENV)

    assert roots.worktree_entries == (p.worktree / "src",)


def test_a_python_outside_a_venv_is_not_read(tmp_path: Path) -> None:
    p = project(tmp_path, with_venv=False)
    prefix = tmp_path / "prefix"
    (prefix / "bin").mkdir(parents=True)
    python = prefix / "bin" / "python3"
    python.symlink_to(os.path.realpath(sys.executable))
    site = prefix / "lib" / VERSION / "site-packages"
    site.mkdir(parents=True)
    (site / "__editable__.pkg-0.1.pth").write_text(f"{p.checkout / 'src'}\n")

    assert site_folders(python) == []
    assert not import_roots([str(python)], p.checkout, p.worktree, ENV).checkout_entries
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")
    assert site_folders(python) == [site]


def test_site_packages_under_lib_or_lib64_alone_is_read(tmp_path: Path) -> None:
    p = project(tmp_path)
    # A venv without the lib64 link (uv and virtualenv make none).
    if (p.venv / "lib64").is_symlink():
        (p.venv / "lib64").unlink()
    argv = [str(p.python), "-c", WHICH]
    roots = import_roots(argv, p.checkout, p.worktree, ENV)
    assert roots.worktree_entries == (p.worktree / "src",)
    assert imported(argv, redirected_env(roots, ENV, p.checkout), p.worktree).is_relative_to(
        p.worktree
    )
    # A venv whose site-packages is a folder of lib64 of its own (a distribution whose
    # platlib is lib64), the editable install's line in it.
    other = tmp_path / "other"
    venv(other)
    if (other / "lib64").is_symlink():
        (other / "lib64").unlink()
    site64 = other / "lib64" / VERSION / "site-packages"
    site64.mkdir(parents=True)
    (site64 / "__editable__.pkg-0.1.pth").write_text(f"{p.checkout / 'src'}\n")
    roots = import_roots([str(other / "bin" / "python")], p.checkout, p.worktree, ENV)
    assert roots.worktree_entries == (p.worktree / "src",)


def test_the_python_a_command_starts_is_found_by_path_and_by_its_hash_bang_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = project(tmp_path)
    monkeypatch.chdir(tmp_path)  # loopctl's own folder is not the worktree
    on_path = {"PATH": f"{p.venv / 'bin'}:/usr/bin:/bin"}
    script(p.worktree / "tools" / "check", f"#!{p.python}\n{WHICH}\n")
    script(p.worktree / "tools" / "envcheck", f"#!/usr/bin/env python3\n{WHICH}\n")
    fixed = p.worktree / "src" / "pkg" / "__init__.py"

    # The checkout's ignored venv named relative to it, PATH's python, a script's #! line
    # naming the venv's Python, and one naming `env python3`.
    commands = ([".venv/bin/python", "-c", WHICH], ["python", "-c", WHICH], ["tools/check"])
    for argv in (*commands, ["tools/envcheck"]):
        program = checkout_program(argv, p.checkout, p.worktree)
        roots = import_roots(program, p.checkout, p.worktree, on_path)
        assert roots.interpreter is not None, argv
        assert roots.interpreter.parent == p.venv / "bin", argv
        assert roots.worktree_entries == (p.worktree / "src",), argv
        env = redirected_env(roots, on_path, p.checkout)
        assert imported(list(program), env, p.worktree) == fixed, argv


def test_odd_hash_bang_lines_and_missing_programs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = project(tmp_path)
    monkeypatch.chdir(tmp_path)
    tools = p.worktree / "tools"
    # A byte that is not UTF-8 after the interpreter: still that interpreter.
    script(tools / "latin", b"#!" + bytes(p.python) + b" -X dev # caf\xe9\n")
    roots = import_roots(["tools/latin"], p.checkout, p.worktree, ENV)
    assert roots.interpreter == p.python
    assert roots.worktree_entries == (p.worktree / "src",)
    # No interpreter at all, a program nowhere on PATH, no program: no Python, no redirection.
    script(tools / "bare", "#!\n")
    for argv in (["tools/bare"], ["no-such-tool", "-x"], []):
        roots = import_roots(argv, p.checkout, p.worktree, ENV)
        assert roots.interpreter is None, argv
        assert not roots.redirected, argv


def test_pythonpath_into_the_checkout_is_redirected_whatever_starts_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = project(tmp_path, with_venv=False)
    monkeypatch.chdir(tmp_path)
    env = {**ENV, "PYTHONPATH": str(p.checkout / "src")}
    tools = p.worktree / "tools"
    run_python = f"exec python3 -c '{WHICH}'\n"
    script(tools / "check.sh", f"#!/bin/sh\n{run_python}")
    script(tools / "env-sh", f"#!/usr/bin/env sh\n{run_python}")
    # No #! line: the shell runs it; its first line only mentions Python.
    script(tools / "plain", f"# python3 runs below\n{run_python}")

    for name in ("check.sh", "env-sh", "plain"):
        argv = [f"tools/{name}"]
        roots = import_roots(argv, p.checkout, p.worktree, env)
        assert roots.interpreter is None, name  # not a Python: only PYTHONPATH says so
        assert roots.worktree_entries == (p.worktree / "src",), name
        said = describe(roots, p.checkout, p.worktree)
        assert said is not None, name
        assert "the check's Python (PYTHONPATH) finds" in said, said
        if name != "plain":
            env_of_check = redirected_env(roots, env, p.checkout)
            fixed = p.worktree / "src" / "pkg" / "__init__.py"
            assert imported(argv, env_of_check, p.worktree) == fixed, name


def test_the_users_other_pythonpath_folders_stay_and_nothing_is_added(tmp_path: Path) -> None:
    p = project(tmp_path)
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "extramod.py").write_text("")
    env = {**ENV, "PYTHONPATH": f"{extra}:{p.checkout / 'src'}"}
    code = "import pkg, extramod; print(pkg.__file__); print(extramod.__file__)"
    argv = [str(p.python), "-c", code]

    out = redirected_env(import_roots(argv, p.checkout, p.worktree, env), env, p.checkout)

    done = subprocess.run(argv, cwd=p.worktree, env=out, capture_output=True, text=True)
    assert done.stdout.split() == [
        str(p.worktree / "src" / "pkg" / "__init__.py"),
        str(extra / "extramod.py"),
    ], done.stderr
    # Without a PYTHONPATH of the user's, the check's path gains the worktree's src/ alone.
    shown = "import sys; print('\\n'.join(sys.path))"
    plain = redirected_env(import_roots(argv, p.checkout, p.worktree, ENV), ENV, p.checkout)
    done = subprocess.run(
        [str(p.python), "-c", shown], cwd=p.worktree, env=plain, capture_output=True, text=True
    )
    inside = [line for line in done.stdout.splitlines() if line.startswith(str(p.worktree))]
    assert inside == [str(p.worktree / "src")], done.stdout


def test_an_in_place_check_imports_the_checkout_as_it_is(tmp_path: Path) -> None:
    p = project(tmp_path)
    c = p.checkout
    env = {**ENV, "PYTHONPATH": str(c / "src")}
    argv = ["python3", "-c", WHICH]

    roots = import_roots(argv, c, c, env)

    assert roots.checkout_entries == (c / "src",)
    assert not roots.redirected
    said = describe(roots, c, c)
    assert said == "the check's Python imports this project from the checkout (src)"
    assert imported(argv, redirected_env(roots, env, c), c) == c / "src" / "pkg" / "__init__.py"
    assert not import_roots([str(p.python)], c, c, ENV).redirected
    assert agent_env(c, c, env) == env


def test_a_program_the_worktree_has_runs_from_the_worktree(tmp_path: Path) -> None:
    checkout = make_repo(tmp_path.resolve() / "proj")
    script(checkout / "tools" / "check", "#!/bin/sh\necho checkout\n")
    (checkout / ".gitignore").write_text("/pytest\n")
    commit_all(checkout, "a check script")
    worktree = tmp_path.resolve() / "wt"
    git(checkout, "worktree", "add", "-q", str(worktree))
    script(worktree / "tools" / "check", "#!/bin/sh\necho worktree\n")
    # An ignored program at the checkout's top does not replace PATH's program of that name.
    script(checkout / "pytest", "#!/bin/sh\necho stray\n")

    argv = checkout_program(["tools/check"], checkout, worktree)
    assert argv == ("tools/check",)
    done = subprocess.run(argv, cwd=worktree, capture_output=True, text=True, check=True)
    assert done.stdout == "worktree\n"
    assert checkout_program(["pytest", "-q"], checkout, worktree) == ("pytest", "-q")
    assert checkout_program([], checkout, worktree) == ()


def test_an_agent_turn_and_validate_read_the_checkouts_python(tmp_path: Path) -> None:
    p = project(tmp_path)

    note = checkout_note(p.checkout, ENV)
    env = agent_env(p.checkout, p.worktree, ENV)

    assert note is not None
    assert REDIRECTED in note, note
    fixed = p.worktree / "src" / "pkg" / "__init__.py"
    assert imported([str(p.python), "-c", WHICH], env, p.worktree) == fixed
    # A project with no install into its checkout: nothing to say, nothing changed.
    bare = project(tmp_path / "bare", with_venv=False)
    assert checkout_note(bare.checkout, ENV) is None
    assert agent_env(bare.checkout, bare.worktree, ENV) == ENV


@pytest.mark.parametrize("name", ["python3", "python"])
def test_without_a_dot_venv_the_python_on_path_is_the_checkouts(name: str, tmp_path: Path) -> None:
    p = project(tmp_path, with_venv=False)
    other = tmp_path / "active"
    site = venv(other)
    (site / "__editable__.pkg-0.1.pth").write_text(f"{p.checkout / 'src'}\n")
    # A venv on PATH with only one of the two names (`python3`, or `python`).
    for gone in ("python3", "python"):
        if gone != name:
            (other / "bin" / gone).unlink()
    env = {"PATH": str(other / "bin")}

    note = checkout_note(p.checkout, env)
    turn = agent_env(p.checkout, p.worktree, env)

    assert note is not None
    assert REDIRECTED in note, note
    fixed = p.worktree / "src" / "pkg" / "__init__.py"
    assert imported([str(other / "bin" / name), "-c", WHICH], turn, p.worktree) == fixed
