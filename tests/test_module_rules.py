"""Rules that cover every module (issue 28, items 5 and 6): each `loopctl` module is named by
the import contracts that apply to all of them; only process.py starts programs (a commented
allow-list names the few that must do it themselves, and why); a document a module cites is in
the repository.

These read the source (with `ast`) and pyproject.toml: a new module that no contract names, or a
new `subprocess.run`, fails here before any review has to notice it.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "loopctl"


# --- import contracts ----------------------------------------------------------------------------


# Subpackages that sit in the foundation layer with the top-level modules: the "import no
# subpackage" contract covers them as a source, and never forbids them.
FOUNDATION_PACKAGES = {"git"}


def _top_level() -> tuple[set[str], set[str]]:
    """loopctl's top-level modules and its subpackages (`__init__`/`__main__` stand above all)."""
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__"}
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    return modules, packages


def _git_modules() -> set[str]:
    """The modules of the git package (its `__init__` re-exports them)."""
    return {p.stem for p in (PACKAGE / "git").glob("*.py")} - {"__init__"}


def _contracts() -> dict[str, dict[str, Any]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return {c["id"]: c for c in config["tool"]["importlinter"]["contracts"]}


def _short(names: list[str]) -> list[str]:
    return [n.removeprefix("loopctl.") for n in names]


def _layered(layers: list[str]) -> list[str]:
    return [name.strip() for row in layers for name in re.split(r"[|:]", row) if name.strip()]


def test_the_layers_contract_places_every_module_once() -> None:
    """A module in no layer may import anything (the engine, say) with every contract kept."""
    modules, packages = _top_level()
    named = _layered(_contracts()["layers"]["layers"])

    assert sorted(n for n in set(named) if named.count(n) > 1) == []
    assert sorted(set(named) ^ (modules | packages)) == []


def test_the_forbidden_contracts_name_every_module_they_are_about() -> None:
    """Each contract about "every top-level module" / "everything but cli" / "everything but the
    two that start programs" lists exactly those, so a new module is covered or this fails."""
    modules, packages = _top_level()
    contracts = _contracts()

    # The bottom layer is the foundation: its modules, and the packages placed there (`sandbox/`).
    bottom = set(_layered(contracts["layers"]["layers"][-1:]))
    foundation = contracts["foundation"]
    foundation_packages = FOUNDATION_PACKAGES | (packages & bottom)
    assert sorted(set(_short(foundation["source_modules"])) ^ (modules | foundation_packages)) == []
    assert (
        sorted(set(_short(foundation["forbidden_modules"])) ^ (packages - foundation_packages))
        == []
    )
    everything_but_cli = (modules | packages) - {"cli"}
    assert sorted(set(_short(contracts["cli-only"]["source_modules"])) ^ everything_but_cli) == []
    # process.py starts programs; git/ runs git itself (see STARTS_PROGRAMS below).
    allowed = (modules | packages) - {"process", "git"}
    assert sorted(set(_short(contracts["subprocess"]["source_modules"])) ^ allowed) == []


def test_the_git_contracts_name_every_module_of_git() -> None:
    """Inside git/, each module sits in one layer (runner at the bottom), and every module but
    runner.py is forbidden subprocess: a new module of the package is covered or this fails."""
    contracts = _contracts()
    named = _layered(contracts["git-layers"]["layers"])

    assert contracts["git-layers"]["containers"] == ["loopctl.git"]
    assert sorted(n for n in set(named) if named.count(n) > 1) == []
    assert sorted(set(named) ^ _git_modules()) == []
    sources = {
        n.removeprefix("loopctl.git.") for n in contracts["git-subprocess"]["source_modules"]
    }
    assert sorted(sources ^ (_git_modules() - {"runner"})) == []
    assert {"runner", "command", "remotes"} <= _git_modules()


def test_architecture_md_names_every_top_level_module_and_package() -> None:
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    modules, packages = _top_level()

    assert sorted(m for m in modules if f"`{m}`" not in text) == []
    assert sorted(p for p in packages if f"`{p}/`" not in text) == []


def test_the_layer_helpers_read_what_they_are_given() -> None:
    """The helpers above can fail: a row split on `|` and `:`, a module missing is seen."""
    assert _layered(["cli", "a | b", "c : d : e"]) == ["cli", "a", "b", "c", "d", "e"]
    modules, packages = _top_level()
    assert {"process", "seeds", "warm", "worktree_pool"} <= modules
    assert {"engine", "delivery", "cli"} <= packages


# --- program starts ------------------------------------------------------------------------------

_SUBPROCESS = {"Popen", "run", "call", "check_call", "check_output", "getoutput"}
_SUBPROCESS |= {"getstatusoutput"}
_OS = {"system", "popen", "posix_spawn", "posix_spawnp"}
_OS_PREFIXES = ("exec", "spawn")
_OTHER = {"pty.spawn", "asyncio.create_subprocess_exec", "asyncio.create_subprocess_shell"}

# The modules that start a program themselves, what they may use, and why.
STARTS_PROGRAMS: dict[str, tuple[set[str], str]] = {
    "process.py": ({"subprocess.Popen"}, "the one way loopctl starts a program"),
    # git's hardened runner predates process.run and keeps its own: a plain timeout, output
    # decoded as git writes it, no process group or redaction pass. Moving every git call onto
    # process.run changes how each one runs, so the split into git/ (issue 28 item 5) left it.
    "git/runner.py": ({"subprocess.run"}, "the hardened git runner"),
    # The user's pager must own the terminal: process.run captures output and starts each
    # program in a session of its own, away from the keyboard.
    "cli/pager.py": ({"subprocess.Popen"}, "the user's pager"),
    # A child program loopctl starts as an agent (stdlib only): it runs the demo's tests.
    "commands/demo_agent.py": ({"subprocess.run"}, "the demo agent, a program of its own"),
    # Runs inside the sandbox as the confined program's parent (process.run started it).
    "egress_bridge.py": ({"os.posix_spawnp"}, "the sandbox's egress bridge"),
    # An agent CLI runs it in place of a connector: it replaces itself with the server.
    "backends/connector_launch.py": ({"os.execvpe"}, "the connector launcher"),
}


def _starts_program(dotted: str) -> bool:
    module, _, name = dotted.rpartition(".")
    if module == "subprocess":
        return name in _SUBPROCESS
    if module == "os":
        return name in _OS or name.startswith(_OS_PREFIXES)
    return dotted in _OTHER


def program_starts(source: str) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of every use of a function that starts a program, through any alias
    (`import subprocess as sp`, `from os import system`), called or not."""
    tree = ast.parse(source)
    aliases: dict[str, str] = {}  # a local name -> the module or function it stands for
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                if _starts_program(f"{node.module}.{alias.name}"):
                    yield node.lineno, f"{node.module}.{alias.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            base = aliases.get(node.value.id)
            if base is not None and _starts_program(f"{base}.{node.attr}"):
                yield node.lineno, f"{base}.{node.attr}"


def test_the_detector_finds_every_way_of_starting_a_program() -> None:
    source = (
        "import os, subprocess as sp\n"
        "from subprocess import check_output as co\n"
        "import asyncio\n"
        "sp.run(['x'])\n"
        "runner = sp.Popen\n"
        "os.system('x')\n"
        "os.execvp('x', ['x'])\n"
        "os.spawnl(0, 'x')\n"
        "asyncio.create_subprocess_exec('x')\n"
        "sp.DEVNULL, sp.CompletedProcess, os.environ, os.fork\n"
    )
    found = sorted(program_starts(source))

    assert found == [
        (2, "subprocess.check_output"),
        (4, "subprocess.run"),
        (5, "subprocess.Popen"),
        (6, "os.system"),
        (7, "os.execvp"),
        (8, "os.spawnl"),
        (9, "asyncio.create_subprocess_exec"),
    ]


def test_only_process_py_starts_programs_and_the_allow_list_is_current() -> None:
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        for _, name in program_starts(path.read_text(encoding="utf-8")):
            found.setdefault(relative, set()).add(name)

    unexpected = {
        module: sorted(names - STARTS_PROGRAMS.get(module, (set(), ""))[0])
        for module, names in found.items()
        if names - STARTS_PROGRAMS.get(module, (set(), ""))[0]
    }
    assert unexpected == {}, "start programs through loopctl.process.run"
    # An entry that no longer starts anything (or uses less than it may) is taken out.
    assert {m: sorted(n) for m, n in found.items()} == {
        m: sorted(names) for m, (names, _) in STARTS_PROGRAMS.items()
    }


# --- documents a module cites --------------------------------------------------------------------

# A file name a docstring or comment cites (DESIGN.md, docs/INVARIANTS.md, README.md …), and the
# bare "DESIGN §5" the code once cited for a document kept outside the repository.
_CITED = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.(?:md|rst|txt))\b|\b(DESIGN) §")

# Files loopctl writes into a user's project, named as what they are, not as documents here.
WRITTEN_BY_LOOPCTL = {"STATE.md", "INBOX.md", "AGENTS.md", "CLAUDE.md", "SKILL.md"}

# Modules other helpers rewrite in this session (issue 28): their citations are theirs to repoint
# to docs/INVARIANTS.md. The lead drops an entry once it is fixed (the last test says which).
PENDING: dict[str, set[str]] = {}


def cited_documents(source: str) -> set[str]:
    """The document files a module's docstring and comments name."""
    tree = ast.parse(source)
    texts = [ast.get_docstring(tree) or ""]
    texts += [
        ast.get_docstring(node) or ""
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    ]
    texts += [line for line in source.splitlines() if line.lstrip().startswith("#")]
    found = {match for text in texts for match in _CITED.findall(text)}
    return {name if name else f"{design}.md" for name, design in found}


@pytest.mark.parametrize(
    ("text", "cited"),
    [
        ('"""See DESIGN.md §5."""\n', {"DESIGN.md"}),
        ('"""Budgets (DESIGN §5 invariant 4)."""\n', {"DESIGN.md"}),
        ('"""x"""\n# as docs/INVARIANTS.md 3 says\n', {"docs/INVARIANTS.md"}),
        ('"""bench/MUTATION.md and README.md"""\n', {"bench/MUTATION.md", "README.md"}),
        ('def f():\n    """Per real-clis.md §1."""\n', {"real-clis.md"}),
        ('"""STATE.md is a projection"""\n', {"STATE.md"}),
        ('"""no document here (a.b.c, DESIGNS)"""\nx = "README.md"\n', set()),
    ],
)
def test_the_citation_reader_finds_document_names(text: str, cited: set[str]) -> None:
    assert cited_documents(text) == cited


def _citations() -> dict[str, set[str]]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        names = cited_documents(path.read_text(encoding="utf-8"))
        found[path.relative_to(ROOT).as_posix()] = {
            name for name in names if Path(name).name not in WRITTEN_BY_LOOPCTL
        }
    return found


def test_every_document_a_module_cites_is_in_the_repository() -> None:
    missing = [
        f"{module} cites {name}"
        for module, names in _citations().items()
        for name in sorted(names - PENDING.get(module, set()))
        if not (ROOT / name).is_file()
    ]
    assert missing == []


def test_the_pending_citations_are_still_there() -> None:
    """An entry of PENDING whose module no longer cites that document is taken out."""
    cited = _citations()
    fixed = {m: sorted(names - cited.get(m, set())) for m, names in PENDING.items()}
    assert {m: names for m, names in fixed.items() if names} == {}


def test_the_invariants_are_numbered_as_the_code_cites_them() -> None:
    """docs/INVARIANTS.md is a numbered list; every "invariant N" a module names is in it."""
    text = (ROOT / "docs" / "INVARIANTS.md").read_text(encoding="utf-8")
    numbered = [int(n) for n in re.findall(r"^(\d+)\. \*\*", text, flags=re.MULTILINE)]
    assert numbered == list(range(1, len(numbered) + 1))
    cited = {
        int(n)
        for path in PACKAGE.rglob("*.py")
        for n in re.findall(r"\b[Ii]nvariants? (\d+)", path.read_text(encoding="utf-8"))
    }
    assert cited, "no module cites an invariant: the pattern is wrong"
    assert sorted(cited - set(numbered)) == []


# --- module names in comments --------------------------------------------------------------------

# Dotted names that start with `loopctl.` but are not modules: span attributes and a test domain.
_NOT_MODULES = re.compile(r"loopctl\.(invalid|unfinished|run\.id|loop|task|attempt|agent|check)")


def _stale_module_names(source: str) -> list[str]:
    tree = ast.parse(source)
    texts = [ast.get_docstring(tree) or ""]
    texts += [
        ast.get_docstring(node) or ""
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    ]
    texts += [line.split("#", 1)[1] for line in source.splitlines() if "#" in line]
    stale = []
    for text in texts:
        for dotted in re.findall(r"\bloopctl(?:\.[A-Za-z_]\w*)+", text):
            if _NOT_MODULES.match(dotted) or _resolves(dotted):
                continue
            stale.append(dotted)
    return stale


def _resolves(dotted: str) -> bool:
    """Whether `dotted` is a module of the package, or a name inside one."""
    parts = dotted.split(".")
    for end in range(len(parts), 1, -1):
        module = PACKAGE.joinpath(*parts[1:end])
        if module.with_suffix(".py").is_file() or (module / "__init__.py").is_file():
            return True
    return False


# Comments in modules other helpers rewrite in this session (see PENDING above).
PENDING_NAMES: dict[str, set[str]] = {}


def test_comments_name_modules_that_exist() -> None:
    assert _stale_module_names('"""see loopctl.remotes"""\n# and loopctl.delivery.remotes\n') == [
        "loopctl.remotes"
    ]
    stale = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(ROOT).as_posix()
        names = set(_stale_module_names(path.read_text(encoding="utf-8")))
        if names - PENDING_NAMES.get(module, set()):
            stale[module] = sorted(names - PENDING_NAMES.get(module, set()))
    assert stale == {}


# --- module size ---------------------------------------------------------------------------------

MAX_LINES = 700

# Modules still over MAX_LINES, and why each could not be split in this session. An entry is
# taken out once its module is split (the second test below says which).
OVER_MAX_LINES: dict[str, str] = {}


def _module_lines() -> dict[str, int]:
    return {
        path.relative_to(PACKAGE).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def test_no_module_is_over_700_lines() -> None:
    lines = _module_lines()
    assert lines["checks/conditions.py"] > 0, "the scan did not read the package"

    too_long = {module: n for module, n in lines.items() if n > MAX_LINES}
    assert {m: n for m, n in too_long.items() if m not in OVER_MAX_LINES} == {}


def test_the_long_modules_allow_list_is_current() -> None:
    """An entry whose module is gone or back under the limit is taken out."""
    lines = _module_lines()
    assert sorted(m for m in OVER_MAX_LINES if lines.get(m, 0) <= MAX_LINES) == []
