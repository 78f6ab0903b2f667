"""`loopctl export`: a loop as a GitHub Actions workflow or a Kubernetes CronJob.

Both run `loopctl run NAME --once` on someone else's scheduler and keep the loop's state between
runs on the `loopctl-state` branch (`loopctl.state_sync`); a CronJob can keep it on a
PersistentVolumeClaim instead. Every value that comes from a definition is written as a quoted
scalar (JSON strings are valid YAML) and, in shell lines, quoted with shlex.

Both install exactly the loopctl that wrote them, never a bare name from the package index (the
name `loopctl` there belongs to another project, and any unclaimed name can be claimed): a git
URL pinned to a commit, a wheel URL pinned to its sha256, or a path in the repository.
"""

from __future__ import annotations

import importlib.metadata
import itertools
import json
import math
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path

from loopctl.definitions.agents import Agent
from loopctl.definitions.fields import format_duration, validate_cron
from loopctl.definitions.loops import Loop, TriggerKind
from loopctl.definitions.project import Project
from loopctl.errors import ExitCode, LoopctlError, UsageError

# loopctl's distribution name; `loopctl` on the package index is an unrelated project.
DIST_NAME = "loopctl-runtime"
GITHUB_MIN_MINUTES = 5  # GitHub runs a scheduled workflow at most every five minutes
PYTHON_VERSION = "3.12"
NODE_VERSION = "20"
K8S_IMAGE = "python:3.12"  # Debian-based: has git; apt can add node for npm-installed CLIs
# Loop names go into file names, YAML, shell lines and Kubernetes names.
_EXPORTABLE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_SECRET_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MINUTE_STEPS = (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30)  # divide an hour evenly
_HOUR_STEPS = (1, 2, 3, 4, 6, 8, 12)  # divide a day evenly
_SHORT_DEADLINE_S = 60  # catch_up = "none": a slot missed by more than this is skipped


class Target(StrEnum):
    GITHUB_ACTIONS = "github-actions"
    K8S = "k8s"


class StateStore(StrEnum):
    BRANCH = "branch"  # `loopctl state pull` / `push` around each run
    PVC = "pvc"  # .loop/log on a PersistentVolumeClaim


class ExportError(LoopctlError):
    """The loop cannot be exported as asked (the message says what to change)."""

    exit_code = ExitCode.USAGE


@dataclass(frozen=True, slots=True)
class Schedule:
    cron: str
    period_s: float  # the shortest gap between two runs
    note: str  # what it came from, for a comment


@dataclass(frozen=True, slots=True)
class Exported:
    """A generated file: its text, where it goes by default, and what the user should know."""

    target: Target
    loop: str
    text: str
    default_path: Path  # relative to the repository root
    cron: str
    secrets: tuple[str, ...]
    installs: tuple[str, ...]
    warnings: tuple[str, ...]


# --- schedules -----------------------------------------------------------------------------------


def every_to_cron(seconds: float, *, minimum_minutes: int = 1) -> tuple[str, float, list[str]]:
    """A cron expression for "every D": (cron, its period in seconds, warnings when rounded).

    Cron repeats evenly only on steps that divide an hour (minutes) or a day (hours), daily or
    weekly, so other periods round to the nearest of those, never below `minimum_minutes`.
    """
    warnings: list[str] = []
    wanted = format_duration(seconds)
    minutes = seconds / 60
    if minutes < minimum_minutes:
        warnings.append(
            f"every {wanted} is more often than this scheduler runs anything: rounded up to"
            f" every {minimum_minutes}m"
        )
        minutes = float(minimum_minutes)
    candidates = [
        *((s, "* * * * *" if s == 1 else f"*/{s} * * * *") for s in _MINUTE_STEPS),
        *((60 * h, "0 * * * *" if h == 1 else f"0 */{h} * * *") for h in _HOUR_STEPS),
        (24 * 60, "0 0 * * *"),
        (7 * 24 * 60, "0 0 * * 0"),
    ]
    allowed = [(m, cron) for m, cron in candidates if m >= minimum_minutes]
    # Nearest by ratio; a tie goes to the longer step (less often than asked, never more).
    best, cron = min(allowed, key=lambda c: (abs(math.log(c[0] / minutes)), -c[0]))
    if not warnings and abs(best - minutes) * 60 > 0.5:
        warnings.append(
            f"every {wanted} is not an even step of an hour, a day or a week: rounded to every"
            f" {format_duration(best * 60)} ({cron})"
        )
    return cron, best * 60.0, warnings


def cron_period(cron: str, tz: str | None = None) -> float:
    """The shortest gap, in seconds, between the next few times `cron` fires."""
    from apscheduler.triggers.cron import CronTrigger

    trigger = CronTrigger.from_crontab(cron, timezone=tz or "UTC")
    now = datetime.now(UTC)
    times: list[datetime] = []
    previous = None
    for _ in range(12):
        fire = trigger.get_next_fire_time(previous, now)
        if fire is None:
            break
        times.append(fire)
        previous, now = fire, fire + timedelta(seconds=1)
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
    return min(gaps) if gaps else 86400.0


def loop_schedule(
    loop: Loop, *, cron: str | None, minimum_minutes: int
) -> tuple[Schedule, list[str]]:
    """The cron schedule a loop runs on elsewhere: `cron` if given, else its own trigger."""
    if cron is not None:
        problem = validate_cron(cron)
        if problem:
            raise UsageError(f"--cron: {problem}")
        return Schedule(cron, cron_period(cron, loop.tz), "--cron"), []
    trigger = loop.trigger
    if trigger is None:
        raise ExportError(
            f'loop {loop.name!r} has no trigger to schedule: add `every = "15m"` or `cron = ...`'
            f" to {loop.path}, or pass --cron EXPR"
        )
    if trigger.kind is TriggerKind.WATCH:
        raise ExportError(
            f"loop {loop.name!r} runs on file changes (watch), which a remote scheduler cannot"
            " see: give it `every` or `cron` in a copy of the loop, or pass --cron EXPR"
        )
    if trigger.kind is TriggerKind.EVERY and trigger.every_s is not None:
        expr, period, warnings = every_to_cron(trigger.every_s, minimum_minutes=minimum_minutes)
        return Schedule(expr, period, f"every {format_duration(trigger.every_s)}"), warnings
    assert trigger.cron is not None
    return Schedule(trigger.cron, cron_period(trigger.cron, loop.tz), "cron"), []


# --- what a loop needs ---------------------------------------------------------------------------


def loop_agents(project: Project, loop: Loop) -> list[Agent]:
    """The agents a tick of `loop` may run: its maker and its judge, as the engine picks them."""
    names: list[str] = []
    maker = loop.maker.agent
    if maker is None and len(project.agents) == 1:
        maker = next(iter(project.agents))
    if maker is None:
        raise ExportError(
            f"loop {loop.name!r} names no maker agent: set [maker] agent in {loop.path}"
            " or [defaults] maker in .loop/config.toml"
        )
    names.append(maker)
    from loopctl.checks.conditions import resolve_condition
    from loopctl.engine.context import judge_name

    condition = None
    if loop.goal:
        configured = project.config.condition_map()
        condition = resolve_condition(loop.goal, project.paths.root, configured=configured)
    judge = judge_name(loop, condition, project.config.checker)
    if judge is not None and judge not in names:
        names.append(judge)
    return [project.agent(name) for name in names]


def secret_names(project: Project, agents: Sequence[Agent]) -> tuple[list[str], list[str]]:
    """The variables the loop's processes may receive (env.allow): (names, warnings)."""
    names: list[str] = []
    warnings: list[str] = []
    for name in [n for agent in agents for n in agent.env_allow] + list(project.config.env_allow):
        if name in names:
            continue
        if name.endswith("*") or not _SECRET_NAME.fullmatch(name):
            warnings.append(
                f"env.allow entry {name!r} is not one variable name: list each variable the"
                " agent needs to have it passed from a secret"
            )
            continue
        names.append(name)
    return names, warnings


def install_commands(agents: Sequence[Agent]) -> list[str]:
    """How to install each agent CLI the loop uses (the backends' own install lines)."""
    from loopctl.backends import backend_for

    commands: list[str] = []
    for agent in agents:
        line = str(getattr(backend_for(agent), "install", "") or "")
        if line and line not in commands:
            commands.append(line)
    return commands


# --- installing loopctl itself ------------------------------------------------------------------

_FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_SHA256 = re.compile(r"sha256=([0-9a-f]{64})")
_NAMED = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[A-Za-z0-9_.,\s-]*\])?\s+@\s+(\S+)")
_SCP_URL = re.compile(r"(?:[^@/:\s]+@)?([^/:\s]+):(?!//)([^\s]+)")
_SSH_URL = re.compile(r"ssh://(?:[^@/\s]+@)?([^/:\s]+)(?::\d+)?/([^\s]+)")
_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")
_ARCHIVE_SUFFIXES = (".whl", ".tar.gz", ".zip")


def install_spec(project: Project, given: str | None) -> tuple[str, list[str]]:
    """What the generated `pip install` installs, pinned to exact code: (spec, warnings).

    `given` (--loopctl-spec) must itself be pinned; without it, the loopctl running now: `.`
    when it is the project's own checkout, else its clone's origin at HEAD, else the git commit
    or hashed archive pip recorded when installing it. Anything else is refused (exit 1).
    """
    if given is not None:
        problem = unpinned_reason(given)
        if problem:
            raise UsageError(f"--loopctl-spec {given!r} {problem}")
        return given.strip(), []
    import loopctl

    package = Path(loopctl.__file__).resolve().parent
    checkout = _source_checkout(package)
    if checkout is not None:
        if checkout == project.root.resolve():
            return ".", []  # the job has this very checkout: install loopctl from it
        return _pin_checkout(checkout)
    recorded, how = _recorded_origin(package)
    if recorded is None:
        raise LoopctlError(
            f"cannot pin the loopctl this runs from ({how}) for the generated install step: pass"
            " --loopctl-spec 'git+https://…/loopctl.git@<full commit sha>' (or a wheel URL"
            " with #sha256=…); a bare package name is refused"
        )
    return recorded, []


def unpinned_reason(spec: str) -> str | None:
    """Why `spec` does not name exact code for pip (None when it does)."""
    text = spec.strip()
    named = _NAMED.fullmatch(text)
    if named:
        if _canonical(named.group(1)) != DIST_NAME:
            return f"names the distribution {named.group(1)!r}: loopctl's is {DIST_NAME!r}"
        text = named.group(3)
    if text == "." or (text.startswith("./") and ".." not in Path(text).parts):
        return None  # a folder of the checked-out repository
    url, _, fragment = text.partition("#")
    if url.startswith(("git+https://", "git+ssh://")):
        host_end = url.find("/", url.index("://") + 3)
        base, at, ref = url.rpartition("@")
        if host_end != -1 and at and len(base) > host_end and _FULL_SHA.fullmatch(ref):
            if not fragment or fragment.startswith("subdirectory="):
                return None
            return "has a URL fragment pip would not check: keep only #subdirectory=…"
        return "is not pinned: end the git URL with @<full commit sha>"
    if url.startswith("https://") and url.endswith(_ARCHIVE_SUFFIXES):
        if _SHA256.fullmatch(fragment):
            return None
        return "is not pinned: end the archive URL with #sha256=<its hash>"
    return (
        "is not pinned to exact code (a name on the package index can be claimed by anyone;"
        " `loopctl` there is another project): give 'git+https://…@<full commit sha>',"
        " 'https://….whl#sha256=<hash>' or a path in the repository such as '.'"
    )


def _source_checkout(package: Path) -> Path | None:
    """The top of the git clone the running loopctl package lives in (as its source), if any."""
    import tomllib

    from loopctl import git

    top = package.parent
    try:
        pyproject = tomllib.loads((top / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    name = pyproject.get("project", {}).get("name")
    if not isinstance(name, str) or _canonical(name) != DIST_NAME:
        return None
    if not git.is_git_repo(top) or git.toplevel(top).resolve() != top:
        return None
    return top


def _pin_checkout(top: Path) -> tuple[str, list[str]]:
    """`git+https://<origin>@<HEAD>` for a clone of loopctl, read with the hardened git helpers."""
    from loopctl import git

    warnings: list[str] = []
    url = git.remote_url(top, "origin")
    if not url:
        raise LoopctlError(
            f"loopctl runs from the clone {top}, which has no remote 'origin' a job could"
            " install it from: add and push one, or pass --loopctl-spec SPEC pinned to a commit"
        )
    https = _https_url(url)
    if https is None:
        raise LoopctlError(
            f"loopctl's clone {top} has origin {git.display_url(url)!r}, which a job cannot"
            " install from: pass --loopctl-spec 'git+https://…@<full commit sha>'"
        )
    if https != url:
        warnings.append(
            f"loopctl's origin {url!r} is not https: the job installs it from {https!r}"
            " (pass --loopctl-spec if that is not reachable)"
        )
    sha = git.head_sha(top)
    if git.is_dirty(top):
        warnings.append(
            f"loopctl's clone {top} has uncommitted changes: the job installs commit"
            f" {sha[:12]} without them"
        )
    fetched = git.git(
        ["branch", "--remotes", "--contains", sha, "--format=%(refname)"], cwd=top, check=False
    )
    if fetched.returncode != 0 or not fetched.stdout.strip():
        warnings.append(
            f"loopctl's commit {sha[:12]} is on no branch fetched from a remote: push it, or the"
            " job cannot install it"
        )
    return f"git+{https}@{sha}", warnings


def _recorded_origin(package: Path) -> tuple[str | None, str]:
    """The pinned source pip recorded for this installed loopctl (PEP 610), or (None, why not)."""
    try:
        dist = importlib.metadata.distribution(DIST_NAME)
    except importlib.metadata.PackageNotFoundError:
        return None, f"{package} is neither a git clone of loopctl nor an installed {DIST_NAME}"
    installed = Path(str(dist.locate_file("loopctl/__init__.py")))
    if not installed.exists() or installed.resolve() != package / "__init__.py":
        return None, f"{package} is not where the installed {DIST_NAME} {dist.version} is"
    recorded = dist.read_text("direct_url.json")
    if not recorded:
        return None, f"{DIST_NAME} {dist.version} was installed from a package index"
    try:
        origin = json.loads(recorded)
    except json.JSONDecodeError:
        return None, f"{DIST_NAME}'s direct_url.json does not parse"
    url = str(origin.get("url", "")) if isinstance(origin, dict) else ""
    https = _https_url(url) if url else None
    vcs = origin.get("vcs_info") if isinstance(origin, dict) else None
    if isinstance(vcs, dict) and vcs.get("vcs") == "git":
        commit = str(vcs.get("commit_id", ""))
        if https and _FULL_SHA.fullmatch(commit):
            return f"git+{https}@{commit}", ""
        return None, f"it was installed from the git URL {url!r}, which a job cannot reach"
    archive = origin.get("archive_info") if isinstance(origin, dict) else None
    if isinstance(archive, dict):
        hashes = archive.get("hashes")
        digest = hashes.get("sha256") if isinstance(hashes, dict) else None
        if digest is None:
            legacy = _SHA256.fullmatch(str(archive.get("hash", "")))
            digest = legacy.group(1) if legacy else None
        if url.startswith("https://") and isinstance(digest, str) and _HEX64.fullmatch(digest):
            return f"{url}#sha256={digest}", ""
    return None, f"it was installed from {url!r}, which a job cannot reach"


def _https_url(url: str) -> str | None:
    """An https URL a job can clone for a remote URL (ssh forms rewritten); None if none."""
    if url.startswith("https://"):
        return _USERINFO.sub("", url)  # a token in the URL must not go into the file
    for pattern in (_SSH_URL, _SCP_URL):
        match = pattern.fullmatch(url)
        if match and "." in match.group(1):  # a host name, not a Windows drive or alias
            return f"https://{match.group(1)}/{match.group(2).lstrip('/')}"
    return None


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# --- GitHub Actions ------------------------------------------------------------------------------


def github_actions(
    project: Project, name: str, *, cron: str | None = None, loopctl_spec: str | None = None
) -> Exported:
    """A workflow that runs one tick of the loop on GitHub's scheduler, state on a branch."""
    loop = _exportable(project, name)
    schedule, warnings = loop_schedule(loop, cron=cron, minimum_minutes=GITHUB_MIN_MINUTES)
    if schedule.period_s < GITHUB_MIN_MINUTES * 60:
        warnings.append(
            f"cron {schedule.cron!r} fires more often than every {GITHUB_MIN_MINUTES} minutes;"
            " GitHub runs it at most that often"
        )
    from_cron = cron is None and loop.trigger is not None and loop.trigger.cron is not None
    if from_cron and loop.tz and loop.tz not in ("UTC", "Etc/UTC"):
        warnings.append(
            f"loop {name!r} has tz = {loop.tz!r}, but GitHub runs cron in UTC: the workflow"
            f" fires at {schedule.cron!r} UTC (adjust its hours if they matter)"
        )
    agents = loop_agents(project, loop)
    secrets, secret_warnings = secret_names(project, agents)
    warnings += secret_warnings
    installs = install_commands(agents)
    actions = {action.name for action in loop.deliver.actions}
    delivers_prs = bool(actions & {"pr", "merge"})
    # `[tasks] source = "github"` (or a command that runs gh) reads issues, PRs and checks.
    github_source = loop.tasks is not None and getattr(loop.tasks, "source", "") == "github"
    uses_gh = github_source or bool(
        loop.tasks and loop.tasks.command and loop.tasks.command[0] == "gh"
    )
    delivers_git = bool(actions - {"commit"})
    spec, spec_warnings = install_spec(project, loopctl_spec)
    warnings += spec_warnings

    lines = [
        f"# Generated by `loopctl export github-actions {name}`. Generate it again after",
        "# changing the loop. Each run works one tick of the loop (`loopctl run --once`) and keeps",
        "# its state (event log, STATE.md, INBOX.md) on the loopctl-state branch between runs;",
        "# `loopctl state pull` in a clone brings it there (`loopctl inbox` shows what it found).",
        f"name: {_q('loop ' + name)}",
        "",
        '"on":  # quoted: YAML 1.1 readers take a bare on for true',
        "  schedule:",
        f"    # {schedule.note}; GitHub runs schedules in UTC, sometimes minutes late",
        f"    - cron: {_q(schedule.cron)}",
        "  workflow_dispatch: {}",
        "",
        "permissions:",
        "  contents: write  # push the loopctl-state branch"
        + (" and the loop's task branches" if delivers_git else ""),
    ]
    if delivers_prs:
        lines.append("  pull-requests: write  # the loop opens or merges pull requests")
    elif uses_gh:
        lines.append("  pull-requests: read  # the loop's tasks come from GitHub, through gh")
    if uses_gh:
        lines += ["  issues: read", "  checks: read"]
    lines += [
        "",
        "# One run of this loop at a time: a run that comes due waits for the one in progress.",
        "concurrency:",
        f"  group: {_q('loopctl-loop-' + name)}",
        "  cancel-in-progress: false",
        "",
        "jobs:",
        "  loop:",
        "    runs-on: ubuntu-latest",
    ]
    if loop.budget.max_wall_s:
        lines.append(f"    timeout-minutes: {math.ceil(loop.budget.max_wall_s / 60) + 15}")
    lines += [
        "    steps:",
        "      - uses: actions/checkout@v4",
        "        with:",
        "          fetch-depth: 0",
        "          # No token in .git/config, where an agent could use it to push past the",
        "          # approval gates: loopctl alone gets it, through GIT_CONFIG_GLOBAL below.",
        "          persist-credentials: false",
        "      - uses: actions/setup-python@v5",
        "        with:",
        f"          python-version: {_q(PYTHON_VERSION)}",
    ]
    if any(line.startswith("npm ") for line in installs):
        lines += [
            "      - uses: actions/setup-node@v4",
            "        with:",
            f"          node-version: {_q(NODE_VERSION)}",
        ]
    install_lines = [f"python -m pip install --quiet {shlex.quote(spec)}", *installs]
    lines += [
        "      - name: Install loopctl" + (" and the agent CLIs" if installs else ""),
        "        run: |",
        *(f"          {line}" for line in install_lines),
        # Ubuntu 23.10+ runners restrict unprivileged user namespaces through AppArmor, which
        # loopctl's agent sandbox (bubblewrap) needs; the runner is a throwaway VM.
        "      - name: Allow the agent sandbox",
        "        run: sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 || true",
        "      - name: Let loopctl's git use the job's token",
        "        run: |",
        '          git config --file "$GIT_CONFIG_GLOBAL" credential.helper \\',
        '            \'!f() { test "$1" = get && echo username=x-access-token'
        ' && echo "password=$GH_TOKEN"; }; f\'',
        "        env:",
        *_loopctl_env(),
        "      - name: Pull the loop's state",
        "        run: loopctl state pull",
        "        env:",
        *_loopctl_env(),
        "      - name: Run the loop",
        f"        run: loopctl run {shlex.quote(name)} --once",
        "        env:",
        "          # The agents see only the variables their env.allow names; GH_TOKEN is for",
        "          # loopctl's own git and gh (delivery), never passed to an agent.",
        *_loopctl_env(),
        *(f"          {secret}: {_secret_ref(secret)}" for secret in secrets),
        "      - name: Push the loop's state",
        "        if: always()",
        "        run: loopctl state push",
        "        env:",
        *_loopctl_env(),
    ]
    return Exported(
        target=Target.GITHUB_ACTIONS,
        loop=name,
        text="\n".join(lines) + "\n",
        default_path=Path(".github") / "workflows" / f"loop-{name}.yml",
        cron=schedule.cron,
        secrets=tuple(secrets),
        installs=tuple(installs),
        warnings=tuple(warnings),
    )


def _loopctl_env() -> list[str]:
    return [
        "          GH_TOKEN: ${{ github.token }}",
        "          GIT_CONFIG_GLOBAL: ${{ runner.temp }}/loopctl-gitconfig",
    ]


def _secret_ref(name: str) -> str:
    # GITHUB_TOKEN cannot be a repository secret: it is the job's own token.
    return "${{ github.token }}" if name == "GITHUB_TOKEN" else "${{ secrets." + name + " }}"


# --- Kubernetes ----------------------------------------------------------------------------------


def kubernetes(
    project: Project,
    name: str,
    *,
    cron: str | None = None,
    state: StateStore = StateStore.BRANCH,
    repo_url: str | None = None,
    image: str = K8S_IMAGE,
    secret: str | None = None,
    git_secret: str = "loopctl-git",
    pvc: str | None = None,
    loopctl_spec: str | None = None,
) -> Exported:
    """A CronJob that clones the repository and runs one tick of the loop per schedule."""
    from loopctl import git

    loop = _exportable(project, name)
    schedule, warnings = loop_schedule(loop, cron=cron, minimum_minutes=1)
    agents = loop_agents(project, loop)
    secrets, secret_warnings = secret_names(project, agents)
    warnings += secret_warnings
    installs = install_commands(agents)
    url = repo_url or git.remote_url(project.root, "origin")
    if not url:
        raise UsageError("the repository has no remote 'origin' to clone from: pass --repo-url URL")
    if not url.startswith(("https://", "http://")):
        warnings.append(
            f"the clone URL {url!r} is not https: the pod needs its own credentials for it"
            " (or pass --repo-url https://…)"
        )
    base = "loopctl-" + (re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-") or "loop")
    job = base[:52].rstrip("-")  # a CronJob name is at most 52 characters
    secret_name = secret or job
    claim = pvc or f"{job[:46]}-state"
    # catch_up = "none": a missed slot is skipped; "one": a late start still runs, until the
    # next slot is due (Forbid then keeps them from overlapping).
    deadline = (
        _SHORT_DEADLINE_S
        if loop.catch_up == "none"
        else max(int(schedule.period_s), _SHORT_DEADLINE_S)
    )
    spec, spec_warnings = install_spec(project, loopctl_spec)
    warnings += spec_warnings
    script = _pod_script(name, state, installs, spec)
    lines = [
        f"# Generated by `loopctl export k8s {name}`. Generate it again after changing the loop.",
        "# Each job clones the repository and works one tick (`loopctl run --once`); state is kept"
        + (
            " on the loopctl-state branch (`loopctl state pull` in a clone shows it)."
            if state is StateStore.BRANCH
            else f" on the PersistentVolumeClaim {claim} (below)."
        ),
        f"# Secrets: kubectl create secret generic {secret_name}"
        + "".join(f" --from-literal={s}=…" for s in secrets),
        f"# Git access (private clone, pushing state): secret {git_secret}, key GH_TOKEN.",
        "apiVersion: batch/v1",
        "kind: CronJob",
        "metadata:",
        f"  name: {_q(job)}",
        "  labels:",
        '    app.kubernetes.io/name: "loopctl"',
        f"    app.kubernetes.io/instance: {_q(job)}",
        "spec:",
        f"  schedule: {_q(schedule.cron)}  # {schedule.note}",
    ]
    if loop.tz:
        lines.append(f"  timeZone: {_q(loop.tz)}")
    lines += [
        "  concurrencyPolicy: Forbid",
        f"  startingDeadlineSeconds: {deadline}  # catch_up = {loop.catch_up}",
        "  successfulJobsHistoryLimit: 3",
        "  failedJobsHistoryLimit: 3",
        "  jobTemplate:",
        "    spec:",
        "      backoffLimit: 0",
    ]
    if loop.budget.max_wall_s:
        lines.append(f"      activeDeadlineSeconds: {int(loop.budget.max_wall_s) + 900}")
    lines += [
        "      template:",
        "        metadata:",
        "          labels:",
        f"            app.kubernetes.io/instance: {_q(job)}",
        "        spec:",
        "          restartPolicy: Never",
        "          containers:",
        "            - name: loop",
        f"              image: {_q(image)}",
        '              command: ["sh", "-c"]',
        "              args:",
        "                - |",
        *(f"                  {line}" if line else "" for line in script),
        "              env:",
        "                - name: LOOPCTL_REPO_URL",
        f"                  value: {_q(url)}",
        "                - name: GH_TOKEN  # loopctl's git only; no agent is given it",
        "                  valueFrom:",
        "                    secretKeyRef:",
        f"                      name: {_q(git_secret)}",
        '                      key: "GH_TOKEN"',
        "                      optional: true",
    ]
    for variable in secrets:
        lines += [
            f"                - name: {_q(variable)}",
            "                  valueFrom:",
            "                    secretKeyRef:",
            f"                      name: {_q(secret_name)}",
            f"                      key: {_q(variable)}",
        ]
    if state is StateStore.PVC:
        lines += [
            "              volumeMounts:",
            '                - name: "state"',
            '                  mountPath: "/state"',
            "          volumes:",
            '            - name: "state"',
            "              persistentVolumeClaim:",
            f"                claimName: {_q(claim)}",
            "---",
            "apiVersion: v1",
            "kind: PersistentVolumeClaim",
            "metadata:",
            f"  name: {_q(claim)}",
            "spec:",
            '  accessModes: ["ReadWriteOnce"]',
            "  resources:",
            "    requests:",
            '      storage: "1Gi"',
        ]
    return Exported(
        target=Target.K8S,
        loop=name,
        text="\n".join(lines) + "\n",
        default_path=Path(f"loop-{name}.cronjob.yaml"),
        cron=schedule.cron,
        secrets=tuple(secrets),
        installs=tuple(installs),
        warnings=tuple(warnings),
    )


def _pod_script(name: str, state: StateStore, installs: Sequence[str], spec: str) -> list[str]:
    run = f"loopctl run {shlex.quote(name)} --once"
    lines = [
        "set -eu",
        'if [ -n "${GH_TOKEN:-}" ]; then',
        "  git config --global credential.helper \\",
        '    \'!f() { test "$1" = get && echo username=x-access-token'
        ' && echo "password=$GH_TOKEN"; }; f\'',
        "fi",
        'git clone --quiet "$LOOPCTL_REPO_URL" /tmp/repo',
        "cd /tmp/repo",
        f"python -m pip install --quiet --root-user-action=ignore {shlex.quote(spec)}",
    ]
    if any(line.startswith("npm ") for line in installs):
        lines.append("apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null")
    lines += list(installs)
    if state is StateStore.PVC:
        lines += [
            "# The event log lives on the volume; STATE.md and INBOX.md are rebuilt from it.",
            "mkdir -p /state/log .loop",
            "ln -sfn /state/log .loop/log",
            run,
        ]
    else:
        lines += [
            "loopctl state pull",
            "status=0",
            f"{run} || status=$?",
            "loopctl state push",
            'exit "$status"',
        ]
    return lines


# --- writing -------------------------------------------------------------------------------------


def write_export(exported: Exported, root: Path, output: Path | None, *, force: bool) -> Path:
    """Write the file (default place unless `output`); refuse to replace one without `force`."""
    from loopctl.atomicfile import write_atomic

    target = output if output is not None else root / exported.default_path
    if target.exists() and not force:
        raise LoopctlError(f"{target} exists: pass --force to replace it, or --output PATH")
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, exported.text)
    return target


# --- helpers -------------------------------------------------------------------------------------


def _exportable(project: Project, name: str) -> Loop:
    loop = project.loop(name)
    if not _EXPORTABLE_NAME.fullmatch(name):
        raise ExportError(
            f"loop name {name!r} cannot go into a workflow or a Kubernetes name: rename"
            f" {loop.path.name} to letters, digits, '-', '_' and '.'"
        )
    return loop


def _q(text: str) -> str:
    """A YAML double-quoted scalar (a JSON string is one)."""
    return json.dumps(text, ensure_ascii=False)
