"""The corpus of real open-source projects (scripts/fetch-corpus): where it is, and each project
made into a user's checkout — a fresh git repository with the project as published, its own
`.venv` (humanize installed into it with `pip install -e .`) or `node_modules`.

The corpus is fetched once, pinned, outside the repository. Where it is missing the tests are
skipped with the reason, unless LOOPCTL_REQUIRE_REAL_CLIS=1 (CI sets it) or CI=true, which make
a missing corpus a failure, as for the real agent CLIs.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.cli import run_loopctl
from support.repos import commit_all, git, toml_value, write_agent, write_config, write_loop

# Read at import, before any test swaps HOME for its own.
REAL_HOME = Path.home()
PINS = Path(__file__).resolve().parents[2] / "scripts" / "corpus"


def corpus_root() -> Path:
    given = os.environ.get("LOOPCTL_CORPUS")
    return Path(given) if given else REAL_HOME / ".cache" / "loopctl" / "corpus"


def require_corpus() -> Path:
    """The fetched corpus, or a skip (a failure in CI) saying how to fetch it."""
    root = corpus_root()
    if (root / "installed").is_file():
        return root
    reason = f"the corpus of real projects is not fetched into {root}: run scripts/fetch-corpus"
    if os.environ.get("LOOPCTL_REQUIRE_REAL_CLIS") == "1" or os.environ.get("CI") == "true":
        pytest.fail(reason + " (CI or LOOPCTL_REQUIRE_REAL_CLIS=1)")
    pytest.skip(reason)


@contextmanager
def work_folder() -> Iterator[Path]:
    """A private folder for one test's checkout, beside the corpus rather than under /tmp: a
    user's project lives in their home, and a sandbox treats /tmp apart."""
    parent = require_corpus() / "work"
    parent.mkdir(exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="checkout-", dir=parent))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def checkout(name: str, into: Path) -> Path:
    """The project `name` as published, committed as the first commit of a new repository."""
    repo = into / name
    shutil.copytree(require_corpus() / "projects" / name, repo, symlinks=True)
    git(repo, "init", "-q", "-b", "main")
    return repo


def ignore(repo: Path, *patterns: str) -> None:
    gitignore = repo / ".gitignore"
    text = gitignore.read_text() if gitignore.exists() else ""
    gitignore.write_text(text + "".join(f"\n{p}" for p in patterns) + "\n")


def python_venv(repo: Path, *, editable: bool) -> Path:
    """`repo/.venv` with the pinned test tools, and the project installed into it with
    `pip install -e .` when `editable`.

    The tools come from one venv per corpus, installed from the corpus's wheels (checked against
    their hashes) the first time and copied after: a copy takes a fraction of a second where
    pip took about five, a dozen times a suite. The copy is what pip would have made there: its
    scripts' `#!` lines name the copy's own Python. The editable install is pip's, each time."""
    root = require_corpus()
    tools = root / "python-tools" / "bin" / "python"
    venv = repo / ".venv"
    template = _tools_venv(root, tools)
    shutil.copytree(template, venv, symlinks=True)
    python = venv / "bin" / "python"
    for script in (venv / "bin").iterdir():
        _point_shebang(script, template / "bin" / "python", python)
    if editable:
        # The build backend (hatchling) is one of the tools: no download at install time.
        pip: list[str | Path] = [tools, "-m", "pip", "--python", python, "install", "-q"]
        subprocess.run(
            [*pip, "--no-index", "--no-build-isolation", "--no-deps", "-e", repo],
            check=True,
            capture_output=True,
        )
    return python


def _tools_venv(root: Path, tools: Path) -> Path:
    """The venv holding the pinned test tools, made once per pin (xdist workers race to make
    it: each builds its own and renames it into place; the first rename wins)."""
    pins = (PINS / "python-tools.txt").read_bytes()
    key = hashlib.sha256(pins + str(tools).encode()).hexdigest()[:16]
    template = root / "venvs" / f"tools-{key}"
    if (template / "bin" / "python").exists():
        return template
    template.parent.mkdir(exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix="building-", dir=template.parent)) / "venv"
    subprocess.run([tools, "-m", "venv", "--without-pip", building], check=True)
    pip: list[str | Path] = [tools, "-m", "pip", "--python", building / "bin" / "python"]
    subprocess.run(
        [
            *(*pip, "install", "-q", "--no-index", "--find-links", root / "wheels"),
            *("--require-hashes", "-r", PINS / "python-tools.txt"),
        ],
        check=True,
        capture_output=True,
    )
    for script in (building / "bin").iterdir():  # pip named the folder it was built in
        _point_shebang(script, building / "bin" / "python", template / "bin" / "python")
    try:
        building.rename(template)
    except OSError:
        if not (template / "bin" / "python").exists():
            raise  # not another worker's venv in the way: a real failure
    shutil.rmtree(building.parent, ignore_errors=True)
    return template


def _point_shebang(script: Path, old: Path, new: Path) -> None:
    """A copied script's `#!` line names the copy's Python, as pip writes it in place."""
    if script.is_symlink() or not script.is_file():
        return
    head = f"#!{old}\n".encode()
    data = script.read_bytes()
    if data.startswith(head):
        script.write_bytes(f"#!{new}\n".encode() + data[len(head) :])


def node_modules(repo: Path) -> None:
    """The project's test toolchain pinned: its devDependencies replaced by the corpus's (its
    lint and coverage tools dropped), the lockfile beside them, and the `node_modules` that
    `npm ci` made from that lockfile in scripts/fetch-corpus (a copy: the same tree, in seconds)."""
    package_path = repo / "package.json"
    package = json.loads(package_path.read_text())
    pinned = json.loads((PINS / "node-tools" / "package.json").read_text())
    package["devDependencies"] = pinned["devDependencies"]
    package_path.write_text(json.dumps(package, indent=2) + "\n")
    shutil.copy2(PINS / "node-tools" / "package-lock.json", repo / "package-lock.json")
    tools = require_corpus() / "node-tools"
    shutil.copytree(tools / "node_modules", repo / "node_modules", symlinks=True)


def commit(repo: Path, message: str) -> None:
    commit_all(repo, message)


def replace_in(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path} no longer contains {old!r}: the corpus pin changed"
    path.write_text(text.replace(old, new, 1))


# --- the projects, and each made into a user's checkout ---------------------------------------

PYTEST = (".venv/bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider")
JEST = ("npx", "--no", "jest")
TIMEOUT = 280  # a Node run runs jest twice (on the base, then on the fix)


@dataclass(frozen=True, slots=True)
class Edit:
    """A one-line change: `old` becomes `new` in `path`."""

    path: str
    old: str
    new: str

    def undone(self) -> Edit:
        return Edit(self.path, self.new, self.old)


@dataclass(frozen=True, slots=True)
class Project:
    name: str
    kind: str  # "src" (editable install) | "flat" | "node"
    bug: Edit  # what the test injects; its undoing is the fix
    weakening: Edit  # what a cheating maker does to the test the bug fails, instead
    check: tuple[str, ...]  # the project's test command, as a user writes it


PROJECTS = {
    "humanize": Project(
        "humanize",
        "src",
        Edit(
            "src/humanize/filesize.py",
            "if abs_bytes == 1 and not gnu:",
            "if abs_bytes == 0 and not gnu:",
        ),
        Edit(
            "tests/test_filesize.py",
            '([1, False, False], "1 Byte"),',
            '([1, False, False], "1 Bytes"),',
        ),
        PYTEST,
    ),
    "more-itertools": Project(
        "more-itertools",
        "flat",
        Edit(
            "more_itertools/more.py",
            "    return default\n\n\ndef last(",
            "    return None\n\n\ndef last(",
        ),
        Edit(
            "tests/test_more.py",
            "self.assertEqual(mi.first([], 'boo'), 'boo')",
            "self.assertEqual(mi.first([], 'boo'), None)",
        ),
        PYTEST,
    ),
    "ts-dedent": Project(
        "ts-dedent",
        "node",
        Edit(
            "src/index.ts",
            "const endentation = endentations ? endentations[1] : ''",
            "const endentation = ''",
        ),
        Edit(
            "src/__tests__/issue-21.spec.ts",
            "expect(a).toEqual(expected);",
            "expect(a).toEqual(a);",
        ),
        JEST,
    ),
}


@dataclass
class Checkout:
    project: Project
    repo: Path

    def run(self, *args: str) -> tuple[int, str]:
        """loopctl as a real process in the checkout: (exit code, what it printed)."""
        done = run_loopctl(self.repo, *args, timeout=TIMEOUT + 60)
        assert "Traceback" not in done.stderr, done.stderr
        return done.returncode, done.stdout + done.stderr

    def file(self, path: str) -> str:
        return (self.repo / path).read_text()

    def on_branch(self, branch: str, path: str) -> str:
        return git(self.repo, "show", f"{branch}:{path}")

    def task_branches(self) -> list[str]:
        out = git(self.repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/loop/")
        return out.split()


def make_checkout(name: str, folder: Path) -> Checkout:
    """The project as published, set up as its README says, with the loopctl files a user adds
    committed on top, then the bug committed as the newest commit on main."""
    project = PROJECTS[name]
    repo = checkout(name, folder)
    ignore(repo, ".venv/", "node_modules/", "__pycache__/")
    if project.kind == "node":
        node_modules(repo)
    else:
        python_venv(repo, editable=project.kind == "src")
    commit(repo, f"{name} as published")
    replace_in(repo / project.bug.path, project.bug.old, project.bug.new)
    commit(repo, "a one-line bug")
    return Checkout(project, repo)


def configure(
    co: Checkout,
    maker: Edit | None,
    *,
    conditions: dict[str, tuple[str, ...]] | None = None,
    loop: str | None = None,
    script: tuple[str, ...] = (),
) -> None:
    """The maker (a scripted agent making `maker`, or one that fails when None; given
    `script`, tests/agents/<script[0]> with the rest as its arguments instead), the config,
    and for a `[checker]` test a loop, committed as the user would."""
    if script:
        write_agent(co.repo, "maker", *script)
    elif maker is None:
        write_agent(co.repo, "maker", "fails.py")
    else:
        write_agent(co.repo, "maker", "replaces_text.py", maker.path, maker.old, maker.new)
    config = 'version = 1\n\n[defaults]\nmaker = "maker"\n'
    if conditions:
        config += "\n[conditions]\n" + "".join(
            f"{toml_value(k)} = {toml_value(list(v))}\n" for k, v in conditions.items()
        )
    write_config(co.repo, config)
    if loop is not None:
        write_loop(co.repo, "green", loop)
    commit(co.repo, "loopctl's files")
