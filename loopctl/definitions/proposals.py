"""What an agent may propose to change in its loop's definitions, and how a proposal reads.

Issue 31, item 3: an agent never writes the definitions its loop runs under (invariant 10); it
proposes. A proposal is a unified diff whose every file is a definition file (`DEFINITION_GLOBS`:
`.loop/config.toml`, the loop, agent and skill folders): plain text files, no link, no
submodule, no path that leaves the repository. The agent writes one as `.loop-proposals/NAME.md`
in its worktree (a rationale, then the diff in a fenced ```diff block), or edits a definition file
directly, which loopctl strips from the attempt and turns into the same kind of proposal.

Pure: the text of a proposal file and of a patch in, problems out. The patch's effect on a real
tree is checked again once applied (loopctl.engine.proposals, loopctl.commands.proposals).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from loopctl.globs import first_match

# The folder, at the top of a worktree, where an agent writes its proposal files.
PROPOSAL_DIR = ".loop-proposals"
# A proposal file is named after a short slug, with the suffix ".md".
PROPOSAL_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}\.md$")
# Bigger is refused: a proposal is read by a person before it takes effect.
MAX_PROPOSAL_BYTES = 64 * 1024

# Every file loopctl reads definitions from (definitions.project's AGENT_SOURCES and
# SKILL_SOURCES, the config and the loops): what a proposal may change, and nothing else.
DEFINITION_GLOBS: tuple[str, ...] = (
    ".loop/config.toml",
    ".loop/loops/*.toml",
    ".loop/agents/*.toml",
    "agents/*.toml",
    ".codex/agents/*.toml",
    ".claude/agents/*.md",
    "skills/**",
    ".claude/skills/**",
    ".agents/skills/**",
)

# Git's modes for a regular file; a link (120000) or a submodule (160000) is never proposed.
FILE_MODES = frozenset({"100644", "100755"})

_FENCE = re.compile(r"^```+ *(?:diff|patch|udiff)? *$")


@dataclass(frozen=True, slots=True)
class ProposalFile:
    """A proposal file read: its rationale (the prose) and its diff."""

    name: str
    rationale: str
    diff: str


def read_proposal_file(name: str, text: str) -> ProposalFile:
    """The rationale and the diff of `.loop-proposals/NAME.md`; ValueError naming what is
    wrong. The diff is the first fenced block (```diff); without a fence, the whole file from
    its first `diff --git` or `--- ` line."""
    if not PROPOSAL_NAME.match(name):
        raise ValueError(
            f"{PROPOSAL_DIR}/{name}: a proposal file is a slug and '.md' (a-z, 0-9, '.', '_', '-')"
        )
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if _FENCE.match(line.rstrip("\n"))), None)
    if start is not None:
        end = next(
            (i for i in range(start + 1, len(lines)) if lines[i].startswith("```")), len(lines)
        )
        diff = "".join(lines[start + 1 : end])
        rationale = "".join(lines[:start] + lines[end + 1 :])
    else:
        first = next(
            (i for i, line in enumerate(lines) if line.startswith(("diff --git ", "--- "))),
            None,
        )
        if first is None:
            raise ValueError(f"{PROPOSAL_DIR}/{name}: no diff in it (put one in a ```diff block)")
        diff, rationale = "".join(lines[first:]), "".join(lines[:first])
    if not diff.strip():
        raise ValueError(f"{PROPOSAL_DIR}/{name}: its ```diff block is empty")
    if not diff.endswith("\n"):
        diff += "\n"
    return ProposalFile(name, rationale.strip(), diff)


def is_definition(path: str) -> bool:
    """True when `path` (repository-relative, `/`-separated) is a file a proposal may change."""
    return first_match(path, DEFINITION_GLOBS) is not None


def holds_definitions(path: str, patterns: Sequence[str] = DEFINITION_GLOBS) -> bool:
    """True when `path` is where a folder of definition files is (`.loop`, `agents`,
    `.claude/agents`, a skill's folder): a link or file put there replaces them all."""
    probes = ("x", "x.toml", "x.md", "x/SKILL.md", "x/x.toml")
    return any(first_match(f"{path}/{probe}", patterns) is not None for probe in probes)


def path_problem(path: str) -> str | None:
    """Why `path`, named by a patch, may not be proposed; None when it may."""
    if not path or any(c in path for c in ("\0", "\\", '"')):
        return f"{path!r} is not a plain path"
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path):
        return f"{path} is an absolute path"
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return f"{path} leaves its folder (a '..', '.' or empty part)"
    if any(part.lower() == ".git" for part in parts):
        return f"{path} is inside .git"
    if not is_definition(path):
        return (
            f"{path} is not a definition file (a proposal may change {', '.join(DEFINITION_GLOBS)})"
        )
    return None


def _header_path(rest: str) -> str | None:
    """The path of a `--- a/x` / `+++ b/x` line's remainder; None for /dev/null."""
    name = rest.split("\t", 1)[0].rstrip("\n")
    if name == "/dev/null":
        return None
    if name.startswith('"'):
        return '"'  # a quoted (escaped) name: refused by path_problem as not plain
    return name[2:] if name.startswith(("a/", "b/")) else name


def patch_problems(diff: str) -> list[str]:
    """What makes `diff` no proposal: paths outside the definitions, links, submodules,
    binary content; [] when there is nothing wrong. `paths_of` lists the paths it names."""
    problems: list[str] = []
    named = False
    for line in diff.splitlines():
        if line.startswith(("--- ", "+++ ")):
            path = _header_path(line[4:])
            named = True
            if path is not None:
                problems.append(path_problem(path) or "")
        elif line.startswith(("rename from ", "rename to ", "copy from ", "copy to ")):
            problems.append(path_problem(line.split(" ", 2)[2]) or "")
        elif line.startswith(("new file mode ", "deleted file mode ", "old mode ", "new mode ")):
            mode = line.rsplit(" ", 1)[1]
            if mode not in FILE_MODES:
                kind = "a symbolic link" if mode == "120000" else f"mode {mode}"
                problems.append(f"it makes {kind}: only plain text files may be proposed")
        elif line.startswith(("GIT binary patch", "Binary files ")):
            problems.append("it holds binary content: only plain text files may be proposed")
        elif line.startswith("index ") and line.rstrip().endswith((" 120000", " 160000")):
            problems.append("it changes a symbolic link or a submodule")
    if not named:
        problems.append("it is not a unified diff (no ---/+++ file lines)")
    return list(dict.fromkeys(p for p in problems if p))


def paths_of(diff: str) -> list[str]:
    """The files `diff` changes, in order, each once."""
    found: list[str] = []
    for line in diff.splitlines():
        if line.startswith(("--- ", "+++ ")):
            path = _header_path(line[4:])
            if path is not None and path not in found:
                found.append(path)
    return found


def tree_problems(changes: Iterable[tuple[str, str]]) -> list[str]:
    """What makes the change a patch really made no proposal: each (path, mode) it leaves a
    file at (mode "" for a file it deletes) must be a definition file and a plain file."""
    problems = []
    for path, mode in changes:
        problem = path_problem(path)
        if problem is None and mode and mode not in FILE_MODES:
            kind = "a symbolic link" if mode == "120000" else f"mode {mode}"
            problem = f"{path} would be {kind}: only plain text files may be proposed"
        if problem is not None:
            problems.append(problem)
    return problems


def definitions_digest(entries: Sequence[tuple[str, str, str]]) -> str:
    """One digest of the definition files a commit holds ((mode, sha, path) each, as
    git.tree_files lists them): a proposal applies only while it is unchanged."""
    lines = "".join(f"{mode} {sha} {path}\0" for mode, sha, path in sorted(entries))
    return hashlib.sha256(lines.encode("utf-8", "surrogateescape")).hexdigest()
