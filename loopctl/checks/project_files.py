"""Reading a project's own files to tell what it uses: pyproject.toml, setup.cfg, tox.ini,
package.json, Makefiles, and whether it has Python files or tests. Tolerant: a file that is
missing, unreadable or malformed reads as empty.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

MAKEFILES = ("GNUmakefile", "makefile", "Makefile")

# Folders a scan for Python files skips: environments, dependencies and build output.
_SKIP_DIRS = frozenset(
    {"node_modules", "venv", "env", "target", "build", "dist", "site-packages", "__pycache__"}
)
_SCAN_LIMIT = 5000  # entries; a scan never walks a whole monorepo to answer "any Python here?"


def read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def read_toml(path: Path) -> dict[str, Any]:
    text = read_text(path)
    if text is None:
        return {}
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}


def toml_has(path: Path, *keys: str) -> bool:
    node: object = read_toml(path)
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


def ini_sections(path: Path) -> configparser.ConfigParser | None:
    text = read_text(path)
    if text is None:
        return None
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text, source=str(path))
    except configparser.Error:
        return None
    return parser


def ini_has(path: Path, section: str) -> bool:
    parser = ini_sections(path)
    return parser is not None and parser.has_section(section)


def has_pytest_config(repo: Path) -> bool:
    return (
        any((repo / name).is_file() for name in ("pytest.toml", ".pytest.toml", "pytest.ini"))
        or (repo / ".pytest.ini").is_file()
        or (repo / "conftest.py").is_file()
        or toml_has(repo / "pyproject.toml", "tool", "pytest")
        or ini_has(repo / "setup.cfg", "tool:pytest")
        or ini_has(repo / "tox.ini", "pytest")
    )


def mypy_files(repo: Path) -> str | None:
    """The `files` mypy is configured with ("" when none), or None when mypy is not configured."""
    pyproject = read_toml(repo / "pyproject.toml").get("tool", {})
    if isinstance(pyproject, dict) and isinstance(pyproject.get("mypy"), dict):
        files = pyproject["mypy"].get("files", "")
        return ",".join(files) if isinstance(files, list) else str(files)
    for name in ("mypy.ini", ".mypy.ini", "setup.cfg"):
        parser = ini_sections(repo / name)
        if parser is not None and parser.has_section("mypy"):
            return parser.get("mypy", "files", fallback="")
    return None


def package_json(repo: Path) -> dict[str, Any]:
    text = read_text(repo / "package.json")
    if text is None:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def package_scripts(package: Mapping[str, Any]) -> dict[str, Any]:
    scripts = package.get("scripts")
    return scripts if isinstance(scripts, dict) else {}


def depends_on(package: Mapping[str, Any], name: str) -> bool:
    for key in ("dependencies", "devDependencies", "peerDependencies", "optionalDependencies"):
        deps = package.get(key)
        if isinstance(deps, dict) and name in deps:
            return True
    return False


def makefile_with_target(repo: Path, target: str) -> str | None:
    rule = re.compile(rf"^{re.escape(target)}\s*:(?!=)", re.MULTILINE)
    for name in MAKEFILES:
        text = read_text(repo / name)
        if text is not None and rule.search(text):
            return name
    return None


def python_files(repo: Path) -> Iterator[Path]:
    """Python files under repo, skipping hidden folders and dependencies; bounded."""
    seen = 0
    for root, dirs, files in os.walk(repo):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
        for name in files:
            seen += 1
            if seen > _SCAN_LIMIT:
                return
            if name.endswith(".py"):
                yield Path(root, name)
        seen += len(dirs)


def has_python_files(repo: Path) -> bool:
    return next(python_files(repo), None) is not None


def has_python_tests(repo: Path) -> bool:
    for path in python_files(repo):
        relative = path.relative_to(repo).parts
        if relative[0] in ("tests", "test") and len(relative) > 1:
            return True
        if path.name.startswith("test_") or path.name.endswith("_test.py"):
            return True
    return False
