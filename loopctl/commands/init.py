"""`loopctl init`: lay out .loop/, example agents and skills, never overwriting a file."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from string import Template

from loopctl import backend_registry
from loopctl.atomicfile import write_atomic
from loopctl.errors import LoopctlError
from loopctl.paths import TEMPLATES

EXAMPLE_SKILLS = ("fix-ci", "triage-issue", "review-diff")


@dataclass(frozen=True, slots=True)
class InitResult:
    root: Path
    created: tuple[str, ...]
    skipped: tuple[str, ...]
    detected: tuple[str, ...]
    maker: str
    checker: str | None  # None: no agent CLI was found to judge prose goals with


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
        '# checker = "claude-checker"  # judges prose goals: set it once its CLI is installed'
        " (no agent CLI was found)"
    )


def planned_files(detected: tuple[str, ...]) -> dict[str, str]:
    """Relative path → content of every file `init` would write."""
    clis = detected or ("claude",)
    files = {
        ".loop/config.toml": Template(_template("config.toml")).substitute(
            maker=f"{clis[0]}-maker", checker_line=_checker_line(detected)
        ),
        ".loop/loops/example.toml": _template("loop-example.toml"),
        ".loop/.gitignore": _template("gitignore"),
    }
    for cli in clis:
        for role in ("maker", "checker"):
            files[f"agents/{cli}-{role}.toml"] = _agent_template(cli, role)
    for skill in EXAMPLE_SKILLS:
        files[f"skills/{skill}/SKILL.md"] = _template("skills", skill, "SKILL.md")
    return files


def init_project(root: Path, *, which: Callable[[str], str | None] = shutil.which) -> InitResult:
    """Write the scaffold into `root`; existing files are left alone and reported as skipped."""
    detected = detect_agent_clis(which)
    created: list[str] = []
    skipped: list[str] = []
    for relative, content in planned_files(detected).items():
        target = root / relative
        if target.exists() or target.is_symlink():
            skipped.append(relative)
            continue
        try:
            write_atomic(target, content)
        except (FileExistsError, NotADirectoryError):
            blocker = next(p for p in target.parents if p.exists() and not p.is_dir())
            raise LoopctlError(
                f"cannot create {relative}: {blocker} is a file, not a folder; move it aside"
            ) from None
        created.append(relative)
    clis = detected or ("claude",)
    return InitResult(
        root=root,
        created=tuple(created),
        skipped=tuple(skipped),
        detected=detected,
        maker=f"{clis[0]}-maker",
        checker=f"{detected[0]}-checker" if detected else None,
    )
