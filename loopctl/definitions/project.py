"""Everything a repository defines, loaded together and cross-checked."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from loopctl.definitions.agents import Agent, Backend, load_claude_agent, load_toml_agent
from loopctl.definitions.config import Config, load_config
from loopctl.definitions.connectors import Connector
from loopctl.definitions.fields import did_you_mean
from loopctl.definitions.loops import Loop, load_loop
from loopctl.definitions.skills import Skill, load_skill
from loopctl.definitions.source import Problems, parse_toml
from loopctl.errors import DefinitionError, Problem, UsageError
from loopctl.paths import ProjectPaths

# (folder, pattern, default backend, front-matter markdown?). `.loop/agents/` is where `init`
# writes loopctl's own format; `agents/` is where it wrote them before, still read.
AGENT_SOURCES: tuple[tuple[str, str, Backend | None, bool], ...] = (
    (".loop/agents", "*.toml", None, False),
    ("agents", "*.toml", None, False),
    (".codex/agents", "*.toml", Backend.CODEX, False),
    (".claude/agents", "*.md", Backend.CLAUDE, True),
)
SKILL_SOURCES = ("skills", ".claude/skills", ".agents/skills")


class DefinitionKind(StrEnum):
    LOOP = "loop"
    AGENT = "agent"
    SKILL = "skill"


@dataclass(frozen=True, slots=True)
class Invalid:
    """A loop, agent or skill file with errors: left out, so that the others still work."""

    kind: DefinitionKind
    name: str  # the name it would have had (a file's stem, a skill's folder)
    path: Path
    problems: tuple[Problem, ...]

    def first(self, root: Path) -> str:
        """Its first error as one `path:line: message` line."""
        return self.problems[0].render(root) if self.problems else str(self.path)

    def warning(self, root: Path) -> str:
        """One line for a command that goes on without it."""
        more = len(self.problems) - 1
        rest = f" (+{more} more)" if more > 0 else ""
        return (
            f"warning: {self.kind} {self.name!r} is invalid and skipped: {self.first(root)}{rest};"
            " `loopctl validate` lists every problem"
        )


@dataclass(frozen=True, slots=True)
class Project:
    """A repository's loops, agents, skills and config, plus what was wrong with them."""

    paths: ProjectPaths
    config: Config
    loops: dict[str, Loop] = field(default_factory=dict)
    agents: dict[str, Agent] = field(default_factory=dict)
    skills: dict[str, Skill] = field(default_factory=dict)
    problems: tuple[Problem, ...] = ()
    # Definition files with errors, left out of loops/agents/skills; every other error (the
    # config, a folder that is a file) is `blocking`: it can affect anything that runs.
    invalid: tuple[Invalid, ...] = ()

    @property
    def root(self) -> Path:
        return self.paths.root

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.is_error]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if not p.is_error]

    @property
    def blocking(self) -> list[Problem]:
        """Errors not confined to one loop, agent or skill file: nothing can safely run."""
        confined = {id(p) for bad in self.invalid for p in bad.problems}
        return [p for p in self.errors if id(p) not in confined]

    def raise_for_errors(self) -> None:
        """Raise for blocking errors; invalid loop, agent and skill files are only left out
        (a command that goes on should print `skipped_warnings()`)."""
        if self.blocking:
            raise DefinitionError(self.blocking, self.root)

    def skipped_warnings(self) -> list[str]:
        """One line per invalid file a command goes on without."""
        return [bad.warning(self.root) for bad in self.invalid]

    def invalid_named(self, kind: DefinitionKind, name: str) -> Invalid | None:
        return next((b for b in self.invalid if b.kind is kind and b.name == name), None)

    def _raise_if_invalid(self, kind: DefinitionKind, name: str) -> None:
        bad = self.invalid_named(kind, name)
        if bad is not None:
            raise DefinitionError(list(bad.problems), self.root)

    def loop(self, name: str) -> Loop:
        found = self.loops.get(name)
        if found is None:
            self._raise_if_invalid(DefinitionKind.LOOP, name)
            known = ", ".join(sorted(self.loops)) or "none"
            raise UsageError(
                f"no loop named {name!r}{did_you_mean(name, self.loops)}"
                f" (.loop/loops/ has: {known})"
            )
        return found

    def agent(self, name: str) -> Agent:
        found = self.agents.get(name)
        if found is None:
            self._raise_if_invalid(DefinitionKind.AGENT, name)
            raise UsageError(
                f"no agent named {name!r}{did_you_mean(name, self.agents)}"
                f" ({_known('agents', self.agents)})"
            )
        return found

    def skill(self, name: str) -> Skill:
        found = self.skills.get(name)
        if found is None:
            self._raise_if_invalid(DefinitionKind.SKILL, name)
            raise UsageError(
                f"no skill named {name!r}{did_you_mean(name, self.skills)}"
                f" ({_known('skills', self.skills)})"
            )
        return found


def _known(kind: str, names: Mapping[str, object]) -> str:
    return f"{kind} found: {', '.join(sorted(names))}" if names else f"no {kind} are defined"


def _files(folder: Path, pattern: str, problems: Problems, *, own: bool = True) -> Iterator[Path]:
    """The definition files in `folder`; `own`: loopctl's own folder (.loop/), where a file in
    place of the folder is an error. Elsewhere (agents/) the project may use the name itself."""
    if not folder.is_dir():
        if folder.exists() or folder.is_symlink():
            if own:
                problems.error(folder, None, "expected a folder of definitions, found a file")
            else:
                problems.warn(folder, None, "not a folder of definitions; ignored")
        return
    yield from sorted(folder.glob(pattern))


def _skill_files(root: Path, problems: Problems) -> Iterator[Path]:
    for source in SKILL_SOURCES:
        folder = root / source
        if not folder.is_dir():
            if folder.exists() or folder.is_symlink():
                problems.warn(folder, None, "not a folder of skills; ignored")
            continue
        for entry in sorted(folder.iterdir()):
            if entry.name.startswith("."):
                continue
            skill_md = entry / "SKILL.md"
            if entry.is_symlink() and not entry.exists():
                problems.error(entry, None, "broken or looping symlink; expected a skill folder")
                continue
            if entry.is_dir():
                if skill_md.exists() or skill_md.is_symlink():
                    yield skill_md
                elif (entry / "skill.md").exists():
                    yield entry / "skill.md"
                else:
                    problems.warn(entry, None, "skill folder has no SKILL.md; ignored")


def load_agents(
    root: Path, problems: Problems, connectors: Mapping[str, Connector] | None = None
) -> dict[str, Agent]:
    agents: dict[str, Agent] = {}
    for folder, pattern, backend, markdown in AGENT_SOURCES:
        for path in _files(root / folder, pattern, problems, own=False):
            agent = (
                load_claude_agent(path, problems)
                if markdown
                else load_toml_agent(path, problems, default_backend=backend, connectors=connectors)
            )
            if agent is None:
                continue
            previous = agents.get(agent.name)
            if previous is not None:
                problems.error(
                    path,
                    None,
                    f"agent {agent.name!r} is already defined in {_rel(previous.path, root)};"
                    " rename one of them",
                )
                continue
            agents[agent.name] = agent
    return agents


def load_skills(root: Path, problems: Problems) -> dict[str, Skill]:
    skills: dict[str, Skill] = {}
    for path in _skill_files(root, problems):
        skill = load_skill(path, problems)
        if skill is None:
            continue
        previous = skills.get(skill.name)
        if previous is not None:
            problems.warn(
                path,
                None,
                f"skill {skill.name!r} is also defined in {_rel(previous.path, root)};"
                " the first one wins",
            )
            continue
        skills[skill.name] = skill
    return skills


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _missing(kind: str, name: str, known: Mapping[str, object], bad: Mapping[str, Path]) -> str:
    """Why a referenced agent or skill is not there: its file is invalid, or it is unknown."""
    if name in bad:
        return f"{kind} {name!r} is invalid (see {bad[name]}; `loopctl validate`)"
    return f"unknown {kind} {name!r}{did_you_mean(name, known)} ({_known(kind + 's', known)})"


def _check_references(
    loops: dict[str, Loop],
    agents: dict[str, Agent],
    skills: dict[str, Skill],
    config: Config,
    problems: Problems,
    bad_agents: Mapping[str, Path],
    bad_skills: Mapping[str, Path],
) -> None:

    def line_of(loop: Loop, *key: str) -> int | None:
        doc = parse_toml(loop.path, Problems())
        return doc.locate(key) if doc is not None else None

    for role, name in (("maker", config.maker), ("checker", config.checker)):
        if name is not None and name not in agents and config.path is not None:
            doc = parse_toml(config.path, Problems())
            line = doc.locate(("defaults", role)) if doc is not None else None
            why = (
                f"is invalid (see {bad_agents[name]}; `loopctl validate`)"
                if name in bad_agents
                else f"is not defined{did_you_mean(name, agents)} ({_known('agents', agents)})"
            )
            problems.error(config.path, line, f"default {role} agent {name!r} {why}")
    for loop in loops.values():
        maker_agent = loop.maker.agent
        if maker_agent is None:
            problems.error(
                loop.path,
                line_of(loop, "maker"),
                "no maker agent: set [maker] agent here or [defaults] maker in .loop/config.toml",
            )
        elif maker_agent not in agents and maker_agent != config.maker:
            problems.error(
                loop.path,
                line_of(loop, "maker", "agent"),
                _missing("agent", maker_agent, agents, bad_agents),
            )
        checker_agent = loop.checker.agent
        if checker_agent is not None and checker_agent not in agents:
            problems.error(
                loop.path,
                line_of(loop, "checker", "agent"),
                _missing("agent", checker_agent, agents, bad_agents),
            )
        for skill in loop.maker.skills:
            if skill not in skills:
                problems.error(
                    loop.path,
                    line_of(loop, "maker", "skills"),
                    _missing("skill", skill, skills, bad_skills),
                )
        if loop.maker.allow_self_edit:
            problems.warn(
                loop.path,
                line_of(loop, "maker", "allow_self_edit"),
                "allow_self_edit = true: the maker may change .loop/, agents and skills",
            )


def _owner(root: Path, loops_dir: Path, path: Path | None) -> tuple[DefinitionKind, str] | None:
    """Which loop, agent or skill file a problem belongs to (None: it is not confined to one)."""
    if path is None:
        return None
    if path.parent == loops_dir and path.suffix == ".toml":
        return DefinitionKind.LOOP, path.stem
    for folder, pattern, _backend, _markdown in AGENT_SOURCES:
        if path.parent == root / folder and path.match(pattern):
            return DefinitionKind.AGENT, path.stem
    for source in SKILL_SOURCES:
        if path.parent.parent == root / source:
            return DefinitionKind.SKILL, path.parent.name
        if path.parent == root / source:
            return DefinitionKind.SKILL, path.name
    return None


def _invalid(root: Path, loops_dir: Path, problems: Problems) -> tuple[Invalid, ...]:
    """The definition files with errors, in the order their first error was found."""
    found: dict[Path, tuple[DefinitionKind, str, list[Problem]]] = {}
    for problem in problems.errors:
        owner = _owner(root, loops_dir, problem.path)
        if owner is None or problem.path is None:
            continue
        found.setdefault(problem.path, (*owner, []))[2].append(problem)
    return tuple(
        Invalid(kind, name, path, tuple(listed)) for path, (kind, name, listed) in found.items()
    )


def load_project(root: Path) -> Project:
    """Load and validate every definition under `root`; problems are returned, not raised.

    A loop, agent or skill file with errors is left out (and listed in `invalid`), so that one
    bad file never stops the others; a loop that uses an invalid agent or skill is invalid too.
    """
    paths = ProjectPaths(root)
    problems = Problems()
    config = load_config(paths.config, problems)
    agents = load_agents(root, problems, config.connector_map())
    skills = load_skills(root, problems)
    early = _invalid(root, paths.loops_dir, problems)
    bad_agents = {b.name: b.path.relative_to(root) for b in early if b.kind is DefinitionKind.AGENT}
    bad_skills = {b.name: b.path.relative_to(root) for b in early if b.kind is DefinitionKind.SKILL}
    loops: dict[str, Loop] = {}
    for path in _files(paths.loops_dir, "*.toml", problems):
        loop = load_loop(path, problems, config)
        if loop is not None:
            loops[loop.name] = loop
    _check_references(loops, agents, skills, config, problems, bad_agents, bad_skills)
    invalid = _invalid(root, paths.loops_dir, problems)
    for bad in invalid:
        if bad.kind is DefinitionKind.LOOP:
            loops.pop(bad.name, None)
    return Project(
        paths=paths,
        config=config,
        loops=loops,
        agents=agents,
        skills=skills,
        problems=tuple(problems.items),
        invalid=invalid,
    )
