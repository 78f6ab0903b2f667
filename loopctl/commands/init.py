"""`loopctl init`: lay out .loop/, example agents and skills, never overwriting a file.

Where things go: agents in `.loop/agents/` (loopctl's own format, which no agent CLI reads, so
it stays in loopctl's folder), skills in `.agents/skills/` (the folder agent CLIs share for Agent
Skills). The older places, `agents/` and `skills/`, are still read: an agent or skill already
defined anywhere loopctl reads is left alone, so that a second definition never clashes.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from string import Template

from loopctl import backend_registry
from loopctl.atomicfile import write_atomic
from loopctl.definitions.project import load_agents, load_skills
from loopctl.definitions.source import Problems
from loopctl.errors import LoopctlError
from loopctl.paths import LOOP_DIR, TEMPLATES

EXAMPLE_SKILLS = ("fix-ci", "triage-issue", "review-diff")
AGENTS_DIR = f"{LOOP_DIR}/agents"
SKILLS_DIR = ".agents/skills"
GITIGNORE = f"{LOOP_DIR}/.gitignore"
# The maker written when no agent CLI is on PATH: a `command` agent whose argv is the user's.
PLACEHOLDER = "command-maker"
WHERE = (
    f"agents go in {AGENTS_DIR}/ (loopctl's own format, read by no CLI), skills in {SKILLS_DIR}/"
    " (the folder agent CLIs share); agents/ and skills/ are still read"
)


@dataclass(frozen=True, slots=True)
class InitResult:
    root: Path
    created: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...]  # (path, why it was not written)
    updated: tuple[tuple[str, tuple[str, ...]], ...]  # (path, the lines added to it)
    detected: tuple[str, ...]
    looked_for: tuple[str, ...]  # the executables of every agent CLI loopctl knows
    maker: str
    checker: str | None  # None: no agent CLI was found to judge prose goals with

    @property
    def config_written(self) -> bool:
        return f"{LOOP_DIR}/config.toml" in self.created

    def next_command(self) -> str:
        """A command that works on this machine now, in a shell: checked, and a first look.

        With an agent CLI and the config init wrote, the example loop's dry run (the checker it
        set judges "tests green" where no test runner is found). With a kept config, whose
        maker init does not know, or with no CLI, the maker's own check: a run of the
        placeholder would only stop at its message."""
        if self.detected and self.config_written:
            return "loopctl validate && loopctl run example --dry-run"
        return f"loopctl validate && loopctl agents test {self.maker}"


def detect_agent_clis(which: Callable[[str], str | None] = shutil.which) -> tuple[str, ...]:
    """The agent CLIs on PATH, in loopctl's order of preference (as their backends declare)."""
    return tuple(spec.name for spec in backend_registry.clis() if which(spec.executable or ""))


def _template(*parts: str) -> str:
    return TEMPLATES.joinpath(*parts).read_text(encoding="utf-8")


def _agent_template(cli: str, role: str) -> str:
    """An example agent for `cli` as `role`: the text its backend declares, else the packaged
    `templates/agents/<cli>-<role>.toml`."""
    spec = backend_registry.find(cli)
    declared = spec.templates.get(role) if spec is not None else None
    return declared if declared is not None else _template("agents", f"{cli}-{role}.toml")


def _checker_line(detected: tuple[str, ...]) -> str:
    # Only prose goals are judged; a goal a command checks ("tests green") never needs this.
    # A checker whose CLI is missing would make every prose goal fail, so none is set then.
    if detected:
        checker = f"{detected[0]}-checker"
        return f'checker = "{checker}"  # judges prose goals; it never did the work it judges'
    return (
        '# checker = "claude-checker"  # judges prose goals: set it once an agent CLI is'
        " installed (none was found)"
    )


def _maker(detected: tuple[str, ...]) -> str:
    return f"{detected[0]}-maker" if detected else PLACEHOLDER


def planned_files(detected: tuple[str, ...]) -> dict[str, str]:
    """Relative path → content of every file `init` would write."""
    files = {
        f"{LOOP_DIR}/config.toml": Template(_template("config.toml")).substitute(
            maker=_maker(detected), checker_line=_checker_line(detected)
        ),
        f"{LOOP_DIR}/loops/example.toml": _template("loop-example.toml"),
        GITIGNORE: _template("gitignore"),
    }
    for cli in detected:
        for role in ("maker", "checker"):
            files[f"{AGENTS_DIR}/{cli}-{role}.toml"] = _agent_template(cli, role)
    if not detected:
        files[f"{AGENTS_DIR}/{PLACEHOLDER}.toml"] = _template("command-placeholder.toml")
    for skill in EXAMPLE_SKILLS:
        files[f"{SKILLS_DIR}/{skill}/SKILL.md"] = _template("skills", skill, "SKILL.md")
    return files


def _defined_elsewhere(root: Path) -> dict[str, str]:
    """Planned path → where the agent or skill it would define already is (another folder
    loopctl reads): a second file of one name would be an error, or shadowed."""
    quiet = Problems()  # `validate` reports them; init only needs the names
    found: dict[str, str] = {}
    for name, agent in load_agents(root, quiet).items():
        found[f"{AGENTS_DIR}/{name}.toml"] = _relative(agent.path, root)
    for name, skill in load_skills(root, quiet).items():
        found[f"{SKILLS_DIR}/{name}/SKILL.md"] = _relative(skill.path, root)
    return found


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def missing_rules(existing: str, wanted: str) -> tuple[str, ...]:
    """The rule lines of `wanted` that `existing` lacks (comments and blanks aside)."""
    have = {line.strip() for line in existing.splitlines()}
    rules = (line.strip() for line in wanted.splitlines())
    return tuple(rule for rule in rules if rule and not rule.startswith("#") and rule not in have)


def _merge_gitignore(target: Path, wanted: str) -> tuple[str, ...]:
    """Add to an existing ignore file the runtime rules it lacks, keeping every line it has."""
    if target.is_symlink() or not target.is_file():
        return ()
    existing = target.read_text(encoding="utf-8", errors="surrogateescape")
    added = missing_rules(existing, wanted)
    if added:
        head = existing if not existing or existing.endswith("\n") else existing + "\n"
        block = "# added by loopctl init: files loopctl rewrites on every run\n"
        write_atomic(target, head + block + "".join(f"{rule}\n" for rule in added))
    return added


def _write(root: Path, relative: str, content: str) -> None:
    try:
        write_atomic(root / relative, content)
    except (FileExistsError, NotADirectoryError):
        target = root / relative
        blocker = next(p for p in target.parents if p.exists() and not p.is_dir())
        raise LoopctlError(
            f"cannot create {relative}: {blocker} is a file, not a folder; move it aside"
        ) from None


def init_project(root: Path, *, which: Callable[[str], str | None] = shutil.which) -> InitResult:
    """Write the scaffold into `root`; existing files are left alone and reported as skipped."""
    detected = detect_agent_clis(which)
    elsewhere = _defined_elsewhere(root)
    created: list[str] = []
    skipped: list[tuple[str, str]] = []
    updated: list[tuple[str, tuple[str, ...]]] = []
    for relative, content in planned_files(detected).items():
        target = root / relative
        if target.exists() or target.is_symlink():
            added = _merge_gitignore(target, content) if relative == GITIGNORE else ()
            if added:
                updated.append((relative, added))
            else:
                skipped.append((relative, "already exists"))
            continue
        if relative in elsewhere:
            skipped.append((relative, f"already defined in {elsewhere[relative]}"))
            continue
        _write(root, relative, content)
        created.append(relative)
    return InitResult(
        root=root,
        created=tuple(created),
        skipped=tuple(skipped),
        updated=tuple(updated),
        detected=detected,
        looked_for=tuple(spec.executable or spec.name for spec in backend_registry.clis()),
        maker=_maker(detected),
        checker=f"{detected[0]}-checker" if detected else None,
    )
