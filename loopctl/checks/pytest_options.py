"""pytest's options as a run would see them: `addopts` from the configuration file pytest would
use, the plugins and configuration files a command line loads, and how verbose the run is.

pytest's entry in `checks/test_runners.py` reads these to tell what a run depends on (its
protect globs) and whether it prints its summary line.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from pathlib import Path

from loopctl.checks.project_files import ini_sections, read_toml

# The files pytest reads its configuration from, in the order it looks for them.
CONFIGS = (
    "pytest.toml",  # pytest 9 reads these first
    ".pytest.toml",
    "pytest.ini",
    ".pytest.ini",
    "pyproject.toml",
    "tox.ini",
    "setup.cfg",
)
# pytest short options whose letters after the first are a value (`-rA`, `-kfoo`), not flags.
_VALUED_SHORT = frozenset("rkmpocWn")


def addopts(repo: Path) -> list[str]:
    """`addopts` of the configuration file pytest would use at the repository root."""
    # The first of these that exists is pytest's configuration, even when it is empty.
    for name in ("pytest.toml", ".pytest.toml"):
        if (repo / name).is_file():
            table = read_toml(repo / name).get("pytest")
            return _split_opts(table.get("addopts") if isinstance(table, dict) else None)
    for name in ("pytest.ini", ".pytest.ini"):
        if (repo / name).is_file():
            parser = ini_sections(repo / name)
            if parser is None or not parser.has_section("pytest"):
                return []
            return _split_opts(parser.get("pytest", "addopts", fallback=""))
    tool = read_toml(repo / "pyproject.toml").get("tool", {})
    pytest_table = tool.get("pytest") if isinstance(tool, dict) else None
    if isinstance(pytest_table, dict):
        options = pytest_table.get("ini_options", pytest_table)
        return _split_opts(options.get("addopts") if isinstance(options, dict) else None)
    for name, section in (("tox.ini", "pytest"), ("setup.cfg", "tool:pytest")):
        parser = ini_sections(repo / name)
        if parser is not None and parser.has_section(section):
            return _split_opts(parser.get(section, "addopts", fallback=""))
    return []


def _split_opts(value: object) -> list[str]:
    if isinstance(value, list):
        return [str(item) for item in value]
    if not isinstance(value, str):
        return []
    try:
        return shlex.split(value)
    except ValueError:
        return value.split()


def extras(args: Sequence[str], repo: Path) -> list[str]:
    """Globs for what this pytest run loads beyond the usual names: `-p` plugin modules (from
    the command and from addopts), a `-c` config file, and the config files and conftests in
    the folders of the test paths it is given (pytest looks for its configuration there first)."""
    globs: list[str] = []
    words = [*addopts(repo), *args]
    for index, word in enumerate(words):
        following = words[index + 1] if index + 1 < len(words) else ""
        if word == "-p":
            globs += _module_globs(following)
        elif word.startswith("-p") and len(word) > 2 and not word.startswith("--"):
            globs += _module_globs(word[2:])
        elif word in ("-c", "--config-file") and following:
            globs.append(following)
        elif word.startswith("--config-file="):
            globs.append(word.partition("=")[2])
    for arg in args:
        if arg.startswith("-"):
            continue
        target = arg.split("::", 1)[0].rstrip("/")
        if not target or Path(target).is_absolute() or ".." in Path(target).parts:
            continue
        if not (repo / target).exists():
            continue  # an option's value, not a test path
        globs += (target, target + "/**")
        for parent in Path(target).parents:
            if parent != Path("."):
                globs += (f"{parent.as_posix()}/{name}" for name in CONFIGS)
    return globs


def _module_globs(module: str) -> list[str]:
    """Files that importing `module` (a dotted name) may run, wherever it sits on sys.path."""
    if not module or module.startswith("no:"):
        return []
    parts = module.split(".")
    globs = [f"**/{'/'.join(parts)}.py", f"**/{'/'.join(parts)}/**"]
    # Importing a.b runs a/__init__.py first.
    globs += (f"**/{'/'.join(parts[:n])}/__init__.py" for n in range(1, len(parts)))
    return globs


def verbosity(args: Sequence[str]) -> int:
    """How verbose pytest is with these options: -1 per -q, +1 per -v."""
    level = 0
    for word in args:
        if word == "--quiet":
            level -= 1
        elif word == "--verbose":
            level += 1
        elif word.startswith("--verbosity="):
            value = word.partition("=")[2]
            level = int(value) if value.lstrip("-").isdigit() else level
        elif re.fullmatch(r"-[A-Za-z]+", word) and word[1] not in _VALUED_SHORT:
            level += word.count("v") - word.count("q")
    return level
