"""Everything a repository defines, loaded together and cross-checked."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from loopctl.definitions.agents import Agent, Backend, load_claude_agent, load_toml_agent
from loopctl.definitions.config import Config, load_config
from loopctl.definitions.connectors import Connector
from loopctl.definitions.fields import did_you_mean
from loopctl.definitions.loops import Loop, load_loop
from loopctl.definitions.skills import Skill, load_skill
from loopctl.definitions.source import Problems
from loopctl.errors import DefinitionError, Problem, UsageError
from loopctl.paths import ProjectPaths

# (folder, pattern, default backend, front-matter markdown?)
AGENT_SOURCES: tuple[tuple[str, str, Backend | None, bool], ...] = (
    ("agents", "*.toml", None, False),
    (".codex/agents", "*.toml", Backend.CODEX, False),
    (".claude/agents", "*.md", Backend.CLAUDE, True),
)
SKILL_SOURCES = ("skills", ".claude/skills", ".agents/skills")


@dataclass(frozen=True, slots=True)
class Project:
    """A repository's loops, agents, skills and config, plus what was wrong with them."""

    paths: ProjectPaths
    config: Config
    loops: dict[str, Loop] = field(default_factory=dict)
    agents: dict[str, Agent] = field(default_factory=dict)
    skills: dict[str, Skill] = field(default_factory=dict)
    problems: tuple[Problem, ...] = ()

    @property
    def root(self) -> Path:
        return self.paths.root

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.is_error]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if not p.is_error]

    def raise_for_errors(self) -> None:
        if self.errors:
            raise DefinitionError(list(self.errors), self.root)

    def loop(self, name: str) -> Loop:
        found = self.loops.get(name)
        if found is None:
            known = ", ".join(sorted(self.loops)) or "none"
            raise UsageError(
                f"no loop named {name!r}{did_you_mean(name, self.loops)}"
                f" (.loop/loops/ has: {known})"
            )
        return found

    def agent(self, name: str) -> Agent:
        found = self.agents.get(name)
        if found is None:
            raise UsageError(
                f"no agent named {name!r}{did_you_mean(name, self.agents)}"
                f" ({_known('agents', self.agents)})"
            )
        return found

    def skill(self, name: str) -> Skill:
        found = self.skills.get(name)
        if found is None:
            raise UsageError(
                f"no skill named {name!r}{did_you_mean(name, self.skills)}"
                f" ({_known('skills', self.skills)})"
            )
        return found


def _known(kind: str, names: Mapping[str, object]) -> str:
    return f"{kind} found: {', '.join(sorted(names))}" if names else f"no {kind} are defined"


def _files(folder: Path, pattern: str, problems: Problems) -> Iterator[Path]:
    if not folder.is_dir():
        if folder.exists() or folder.is_symlink():
            problems.error(folder, None, "expected a folder of definitions, found a file")
        return
    yield from sorted(folder.glob(pattern))


def _skill_files(root: Path, problems: Problems) -> Iterator[Path]:
    for source in SKILL_SOURCES:
        folder = root / source
        if not folder.is_dir():
            if folder.exists() or folder.is_symlink():
                problems.error(folder, None, "expected a folder of skills, found a file")
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
        for path in _files(root / folder, pattern, problems):
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


def _check_references(
    loops: dict[str, Loop],
    agents: dict[str, Agent],
    skills: dict[str, Skill],
    config: Config,
    problems: Problems,
) -> None:
    from loopctl.definitions.source import parse_toml

    def line_of(loop: Loop, *key: str) -> int | None:
        doc = parse_toml(loop.path, Problems())
        return doc.locate(key) if doc is not None else None

    for role, name in (("maker", config.maker), ("checker", config.checker)):
        if name is not None and name not in agents and config.path is not None:
            doc = parse_toml(config.path, Problems())
            line = doc.locate(("defaults", role)) if doc is not None else None
            problems.error(
                config.path,
                line,
                f"default {role} agent {name!r} is not defined{did_you_mean(name, agents)}"
                f" ({_known('agents', agents)})",
            )
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
                f"unknown agent {maker_agent!r}{did_you_mean(maker_agent, agents)}"
                f" ({_known('agents', agents)})",
            )
        checker_agent = loop.checker.agent
        if checker_agent is not None and checker_agent not in agents:
            problems.error(
                loop.path,
                line_of(loop, "checker", "agent"),
                f"unknown agent {checker_agent!r}{did_you_mean(checker_agent, agents)}"
                f" ({_known('agents', agents)})",
            )
        for skill in loop.maker.skills:
            if skill not in skills:
                problems.error(
                    loop.path,
                    line_of(loop, "maker", "skills"),
                    f"unknown skill {skill!r}{did_you_mean(skill, skills)}"
                    f" ({_known('skills', skills)})",
                )
        if loop.maker.allow_self_edit:
            problems.warn(
                loop.path,
                line_of(loop, "maker", "allow_self_edit"),
                "allow_self_edit = true: the maker may change .loop/, agents and skills",
            )


def load_project(root: Path) -> Project:
    """Load and validate every definition under `root`; problems are returned, not raised."""
    paths = ProjectPaths(root)
    problems = Problems()
    config = load_config(paths.config, problems)
    agents = load_agents(root, problems, config.connector_map())
    skills = load_skills(root, problems)
    loops: dict[str, Loop] = {}
    for path in _files(paths.loops_dir, "*.toml", problems):
        loop = load_loop(path, problems, config)
        if loop is not None:
            loops[loop.name] = loop
    _check_references(loops, agents, skills, config, problems)
    return Project(
        paths=paths,
        config=config,
        loops=loops,
        agents=agents,
        skills=skills,
        problems=tuple(problems.items),
    )
