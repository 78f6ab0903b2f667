"""Which source tree a Python check imports, and the override that makes it the worktree's.

A project installed with `pip install -e .` into the checkout's venv is found through the
venv's site-packages: a PEP 660 `.pth` path entry, setuptools' editable finder, or a legacy
`easy-install.pth`. Each of those names the *main checkout*, so a check run in a task's
worktree would test the checkout's code, not the task's. Entries on `PYTHONPATH` come before
every one of them (setuptools' and `editables`' finders are appended to `sys.meta_path`, after
the path finder), so putting each named folder's worktree twin first on `PYTHONPATH` makes the
worktree's sources win without touching the user's venv.

Only files are read here: no interpreter is started, so `--dry-run` and `validate` can ask too.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

# A finder or .pth file larger than this is not an editable install's: it is not read.
_MAX_FILE = 1 << 20


@dataclass(frozen=True, slots=True)
class ImportRoots:
    """What a check's interpreter imports from the main checkout, and the worktree's twins."""

    interpreter: Path | None  # the venv or interpreter the check runs, when one was found
    checkout_entries: tuple[Path, ...]  # import roots inside the main checkout
    worktree_entries: tuple[Path, ...]  # the same roots in the worktree, put first on the path

    @property
    def redirected(self) -> bool:
        return bool(self.worktree_entries)


def python_of(argv: Sequence[str], cwd: Path, path: str | None) -> Path | None:
    """The Python interpreter `argv` starts (`python …`, or a script such as `pytest` whose
    `#!` line names one), or None when it starts no Python loopctl can see."""
    if not argv:
        return None
    program = _which(argv[0], cwd, path)
    if program is None:
        return None
    if Path(argv[0]).name.startswith("python"):
        return program
    try:
        with program.open("rb") as handle:
            first = handle.readline(4096)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    if not words:
        return None
    if Path(words[0]).name == "env" and len(words) > 1:
        found = _which(words[1], cwd, path)
        return found if found is not None and found.name.startswith("python") else None
    return Path(words[0]) if Path(words[0]).name.startswith("python") else None


def _which(program: str, cwd: Path, path: str | None) -> Path | None:
    if "/" in program:
        candidate = Path(program) if os.path.isabs(program) else cwd / program
        return candidate if candidate.is_file() else None
    found = shutil.which(program, path=path)
    return Path(found) if found else None


def site_folders(interpreter: Path) -> list[Path]:
    """The site-packages folders of the venv `interpreter` belongs to (empty for a system
    Python outside a venv, whose editable installs are not per project)."""
    venv = interpreter.parent.parent
    if not (venv / "pyvenv.cfg").is_file():
        return []
    # lib64 is often a link to lib: each folder is read once.
    return sorted(
        {
            folder.resolve()
            for pattern in ("lib/python*/site-packages", "lib64/python*/site-packages")
            for folder in venv.glob(pattern)
            if folder.is_dir()
        }
    )


def checkout_import_roots(site: Path, checkout: Path) -> list[Path]:
    """Import roots inside `checkout` that the site-packages folder `site` points into."""
    checkout = checkout.resolve()
    roots: list[Path] = []

    def keep(path: Path) -> None:
        try:
            path = path.resolve()
        except (OSError, RuntimeError):  # a link loop (RuntimeError on 3.11): names no root
            return
        if _inside(path, checkout) and path not in roots:
            roots.append(path)

    for entry in _children(site):
        name = entry.name
        if name.endswith(".pth"):
            for line in _lines(entry):
                if line and not line.startswith(("#", "import ", "import\t")):
                    keep(Path(line) if os.path.isabs(line) else site / line)
        elif name.endswith(".py") and "editable" in name:
            # setuptools' `__editable___<name>_finder.py`, editables' `_editable_impl_<name>.py`
            for package_dir in _finder_package_dirs(entry):
                keep(package_dir.parent)
        elif name.endswith(".dist-info"):
            project = _editable_project(entry / "direct_url.json")
            if project is not None and _inside(project, checkout):
                # The project's own layout says where its packages are: src/ or its top.
                keep(project / "src" if (project / "src").is_dir() else project)
    return roots


def _children(folder: Path) -> Iterator[Path]:
    try:
        yield from sorted(folder.iterdir())
    except OSError:
        return


def _lines(path: Path) -> list[str]:
    text = _read(path)
    return [line.strip() for line in text.splitlines()] if text else []


def _read(path: Path) -> str | None:
    try:
        if path.stat().st_size > _MAX_FILE:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _finder_package_dirs(path: Path) -> list[Path]:
    """What an editable finder module maps names to (a package's folder or its `__init__.py`,
    a module's file): every string literal that is an absolute path, read from its syntax tree
    (never imported), a package's `__init__.py` as its folder. The caller keeps each one's
    parent: for a module file that is already its import root."""
    text = _read(path)
    if text is None:
        return []
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    found: list[Path] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            value = node.value
            if os.path.isabs(value) and "\n" not in value:
                target = Path(value)
                found.append(target.parent if target.name == "__init__.py" else target)
    return found


def _editable_project(direct_url: Path) -> Path | None:
    text = _read(direct_url)
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    info = data.get("dir_info")
    url = data.get("url")
    if not isinstance(info, dict) or info.get("editable") is not True or not isinstance(url, str):
        return None
    parsed = urlparse(url)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else None


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder)
    except (ValueError, OSError, RuntimeError):
        return False
    return True


def _pythonpath(env: Mapping[str, str]) -> list[str]:
    """The folders `env`'s PYTHONPATH names, its empty entries left out."""
    return [value for value in env.get("PYTHONPATH", "").split(os.pathsep) if value]


def _twin(path: Path, checkout: Path, worktree: Path) -> Path:
    return worktree / path.resolve().relative_to(checkout.resolve())


def import_roots(
    argv: Sequence[str], checkout: Path, worktree: Path, env: Mapping[str, str]
) -> ImportRoots:
    """What a check of `argv`, run in `worktree` with `env`, imports from `checkout`."""
    checkout = checkout.resolve()
    interpreter = python_of(argv, worktree, env.get("PATH"))
    entries: list[Path] = []
    if interpreter is not None:
        for site in site_folders(interpreter):
            entries += [e for e in checkout_import_roots(site, checkout) if e not in entries]
    for value in _pythonpath(env):
        inside = os.path.isabs(value) and _inside(Path(value), checkout)
        if inside and Path(value) not in entries:
            entries.append(Path(value))
    if worktree.resolve() == checkout:
        return ImportRoots(interpreter, tuple(entries), ())
    twins = tuple(dict.fromkeys(_twin(entry, checkout, worktree) for entry in entries))
    return ImportRoots(interpreter, tuple(entries), twins)


def redirected_env(roots: ImportRoots, env: Mapping[str, str], checkout: Path) -> dict[str, str]:
    """`env` with the worktree's import roots first on PYTHONPATH, and the checkout's own
    PYTHONPATH entries dropped (they would import the checkout's code after the worktree's)."""
    out = dict(env)
    if not roots.redirected:
        return out
    checkout = checkout.resolve()
    kept = [
        value
        for value in _pythonpath(env)
        if not (os.path.isabs(value) and _inside(Path(value), checkout))
    ]
    out["PYTHONPATH"] = os.pathsep.join([*map(str, roots.worktree_entries), *kept])
    return out


def checkout_program(argv: Sequence[str], checkout: Path, worktree: Path) -> tuple[str, ...]:
    """`argv` with a program given relative to the checkout (`.venv/bin/python`) that exists
    only in the main checkout (an ignored venv) made absolute, so the checkout's interpreter
    runs against the worktree's code; otherwise `argv` unchanged."""
    if not argv or "/" not in argv[0] or os.path.isabs(argv[0]):
        return tuple(argv)
    if (worktree / argv[0]).exists() or worktree.resolve() == checkout.resolve():
        return tuple(argv)
    mine = checkout / argv[0]
    if mine.is_file() and os.access(mine, os.X_OK):
        return (str(mine), *argv[1:])
    return tuple(argv)


def describe(roots: ImportRoots, checkout: Path, worktree: Path) -> str | None:
    """One line for --dry-run/doctor: which source tree a Python check imports."""
    if not roots.checkout_entries:
        return None
    shown = ", ".join(
        str(entry.resolve().relative_to(checkout.resolve()))  # the checkout itself: "."
        for entry in roots.checkout_entries
    )
    if roots.redirected:
        return (
            f"the check's Python ({roots.interpreter or 'PYTHONPATH'}) finds this project in the"
            f" main checkout ({shown}); loopctl puts the worktree's {shown} first on PYTHONPATH,"
            " so the worktree's code is what is tested"
        )
    return f"the check's Python imports this project from the checkout ({shown})"


def _checkout_pythons(checkout: Path, worktree: Path) -> Iterator[tuple[str, ...]]:
    """The interpreters a user's commands in the project run: its `.venv`, else PATH's."""
    for argv in ((".venv/bin/python",), ("python3",), ("python",)):
        yield checkout_program(argv, checkout, worktree)


def agent_env(checkout: Path, worktree: Path, env: Mapping[str, str]) -> dict[str, str]:
    """`env` for an agent turn in `worktree`: when the checkout's Python finds the project in
    the main checkout, the worktree's twins go first on PYTHONPATH, so the tests an agent runs
    itself import its own edits, as its check will."""
    if worktree.resolve() == checkout.resolve():
        return dict(env)
    for argv in _checkout_pythons(checkout, worktree):
        roots = import_roots(argv, checkout, worktree, env)
        if roots.redirected:
            return redirected_env(roots, env, checkout)
    return dict(env)


def checkout_note(checkout: Path, env: Mapping[str, str]) -> str | None:
    """For `validate` and `doctor`, before any worktree exists: which source tree a check run
    in a task's worktree would import through the checkout's Python (its `.venv`, else the
    `python` on PATH), or None when neither finds the project in the checkout."""
    # Only a path: no worktree is made. Its name just has to differ from the checkout's.
    worktree = checkout.parent / f"{checkout.name}.worktree"
    for argv in _checkout_pythons(checkout, worktree):
        line = describe(import_roots(argv, checkout, worktree, env), checkout, worktree)
        if line is not None:
            return line
    return None
