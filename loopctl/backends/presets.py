"""What every coding-agent CLI preset shares: finding the binary, its environment, running it.

A preset builds an argv from the agent definition, runs it in the worktree through
`loopctl.process`, and parses the CLI's own output format into an AgentResult. The CLI gets the
engine's scrubbed environment plus its own non-secret configuration variables (CODEX_HOME, XDG
directories, …); a credential reaches it only when the user allowed it by name.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from loopctl import process
from loopctl.backends import connectors
from loopctl.backends.base import (
    AgentRequest,
    AgentResult,
    AgentStatus,
    ProbeCheck,
)
from loopctl.backends.base import Invocation as Invocation  # the presets' import place
from loopctl.definitions.agents import Agent
from loopctl.errors import AgentUnavailable
from loopctl.secrets import Redactor, build_env, is_secret_name

# Session ids come from agent output, which is untrusted: only a plain token may become an
# argument (never an option such as "--dangerously-skip-permissions").
_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
_XDG = ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME")


def safe_session_id(value: str | None) -> str | None:
    return value if value is not None and _SESSION_ID.match(value) else None


def positional(prompt: str) -> str:
    """A prompt given as an argument can never be read as an option."""
    return "\n" + prompt if prompt.startswith("-") else prompt


def with_instructions(agent: Agent, prompt: str) -> str:
    """The prompt, with the agent's instructions in front unless loopctl already put them in."""
    instructions = agent.instructions.strip()
    if not instructions or instructions in prompt:
        return prompt
    return f"{instructions}\n\n{prompt}"


@dataclass(frozen=True, slots=True)
class ModelUrl:
    """One endpoint of a CLI's model (issue 25)."""

    variable: str | None  # the base-URL variable that carries it; None: argv, config, or fixed
    url: str
    custom: bool = False  # the user's (base_url, or a variable they set), not the preset's


class CliPreset:
    """Base for the claude, codex, opencode, aider and goose backends."""

    name = ""
    binary = ""
    install = ""  # how to install the CLI, shown when it is missing
    # Credentials the CLI can use; passed only when the user allowed them (env.allow).
    secret_names: tuple[str, ...] = ()
    # The CLI's own non-secret configuration, passed through when set ("PREFIX_*" allowed).
    passthrough: tuple[str, ...] = ()
    # Set for every run (quiet, non-interactive behaviour).
    fixed_env: ClassVar[Mapping[str, str]] = {}
    version_args: tuple[str, ...] = ("--version",)
    # Set only when loopctl's own sandbox confines the CLI (its "already sandboxed" switches).
    sandboxed_env: ClassVar[Mapping[str, str]] = {}
    # Where its model is (issue 25; loopctl.backends.endpoints). Each base-URL variable the CLI
    # reads, with the URL it uses when the variable is unset: an https one becomes a route of
    # loopctl's egress proxy, which then holds the TLS connection and the real key.
    base_url_variables: ClassVar[Mapping[str, str]] = {}
    # Model hosts it reaches with no base-URL variable (through CONNECT: no key put in there).
    model_hosts: tuple[str, ...] = ()
    # What its own login (an OAuth file, not a key) talks to; allowed when no key is lent.
    login_hosts: tuple[str, ...] = ()

    # --- availability ----------------------------------------------------------------------------

    def check_available(self, agent: Agent, env: dict[str, str]) -> None:
        if shutil.which(self.binary, path=env.get("PATH")) is None:
            raise AgentUnavailable(
                f"agent {agent.name!r} needs the {self.binary} CLI, which is not on PATH:"
                f" install it ({self.install}), or choose another backend in {agent.path}"
            )

    def probe(self, agent: Agent, env: dict[str, str], cwd: Path) -> list[ProbeCheck]:
        found = shutil.which(self.binary, path=env.get("PATH"))
        if found is None:
            return [
                ProbeCheck(
                    "binary",
                    False,
                    f"{self.binary} is not on PATH; install it: {self.install}",
                )
            ]
        checks = [ProbeCheck("binary", True, found)]
        try:
            done = process.run(
                [self.binary, *self.version_args],
                cwd=cwd,
                env=self.environment(agent, env),
                timeout=30,
                redactor=Redactor.from_environment(),
            )
        except Exception as exc:  # a broken binary is a finding, not a crash
            checks.append(ProbeCheck("version", False, f"`{self.binary} --version` failed: {exc}"))
            return checks
        version = _first_line(done.stdout_tail) or _first_line(done.stderr_tail)
        if done.ok:
            checks.append(ProbeCheck("version", True, version or "(no output)"))
        else:
            shown = "timed out" if done.timed_out else f"exited {done.exit_code}"
            checks.append(
                ProbeCheck(
                    "version",
                    False,
                    f"`{self.binary} {' '.join(self.version_args)}` {shown}: {version}".rstrip(),
                )
            )
        checks.append(self.credentials_check(agent, env))
        return checks

    def credentials_check(self, agent: Agent, env: Mapping[str, str]) -> ProbeCheck:
        known = ", ".join(self.secret_names)
        passed = [name for name in self.secret_names if env.get(name)]
        if passed:
            return ProbeCheck("credentials", True, f"passes {', '.join(passed)} (of {known})")
        unset_allowed = [
            name for name in self.secret_names if name in env or name in agent.env_allow
        ]
        if unset_allowed:
            detail = (
                f"{', '.join(unset_allowed)} allowed but not set; the CLI must use its own login"
            )
        else:
            detail = (
                f"none of {known} is allowed; the CLI must use its own login"
                f" (or add one to env.allow in {agent.path.name})"
            )
        return ProbeCheck("credentials", True, detail, warning=True)

    # --- running ---------------------------------------------------------------------------------

    def environment(self, agent: Agent, env: Mapping[str, str]) -> dict[str, str]:
        """The engine's scrubbed env, plus this CLI's non-secret configuration and fixed values."""
        names = tuple(n for n in (*self.passthrough, *_XDG) if not is_secret_name(n))
        extra = {
            name: value
            for name, value in build_env(allow=names).items()
            if not is_secret_name(name) and name not in env
        }
        return {**extra, **env, **self.fixed_env, **self.agent_env(agent)}

    def agent_env(self, agent: Agent) -> dict[str, str]:
        """Variables derived from the agent definition (e.g. a base URL)."""
        return {}

    def model_urls(self, agent: Agent, env: Mapping[str, str]) -> list[ModelUrl]:
        """Each model endpoint, given the environment the CLI gets (`environment()`).

        With no key of its own lent, the CLI uses its login: there is no key to put in, and a
        login may pick its own URL (Codex's ChatGPT backend), so its default endpoints are
        reached as the CLI would reach them, through CONNECT, and its login hosts are allowed.
        """
        keyed = any(env.get(name) for name in self.secret_names)
        urls = [
            ModelUrl(name, env[name], custom=True)
            if env.get(name)
            else ModelUrl(name if keyed else None, default)
            for name, default in self.base_url_variables.items()
        ]
        carried = set(self.agent_env(agent)) & set(self.base_url_variables)
        if agent.base_url and not carried:
            urls.append(ModelUrl(None, agent.base_url, custom=True))  # in argv or a config file
        urls += [ModelUrl(None, f"https://{host}") for host in self.model_hosts]
        if not keyed:
            urls += [ModelUrl(None, f"https://{host}") for host in self.login_hosts]
        return urls

    def invocation(self, request: AgentRequest) -> Invocation:
        raise NotImplementedError

    def parse(self, request: AgentRequest, done: Any) -> AgentResult:
        raise NotImplementedError

    def _launch(self, request: AgentRequest) -> Invocation:
        call = self.invocation(request)
        env = call.env or self.environment(request.agent, request.env)
        if request.sandbox is not None:
            env = {**env, **self.sandboxed_env}
        return Invocation(call.argv, call.stdin, env)

    def preview(self, request: AgentRequest) -> Invocation:
        try:
            return self._launch(request)
        finally:
            connectors.unstage(request)

    def run(self, request: AgentRequest) -> AgentResult:
        try:
            call = self._launch(request)
            done = process.run(
                call.argv,
                cwd=request.worktree,
                env=call.env,
                timeout=request.agent.timeout_s,
                stdin=call.stdin,
                stdout_path=request.stdout_path,
                stderr_path=request.stderr_path,
                redactor=connectors.redactor_for(request),
                cancel=request.cancel,
                on_start=request.on_start,
                sandbox=request.sandbox,
                idle=request.idle,
            )
        finally:
            connectors.unstage(request)  # a connector's launch file outlives no turn
        return self.parse(request, done)


# --- parsing helpers ---------------------------------------------------------------------------


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:200]
    return ""


def cli_error_line(done: Any) -> str:
    """The line of a CLI's stderr that says what went wrong, not the stack dump around it."""
    lines = [line.strip() for line in str(done.stderr_tail).splitlines() if line.strip()]
    for line in lines:
        if line.lower().startswith(("error:", "error ")):
            return line[:300]
    if done.timed_out:
        return "timed out"
    if done.stalled:
        return "stalled"
    return lines[-1][:300] if lines else f"exit code {done.exit_code}, no output"


def stdout_text(done: Any) -> str:
    """The whole (redacted) stdout from its log file; the in-memory tail is only the end."""
    path = done.stdout_path
    if path is not None:
        try:
            return Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            pass
    return str(done.stdout_tail)


def json_lines(text: str) -> Iterator[dict[str, Any]]:
    """Every JSON object line of a JSONL stream; other lines (banners, warnings) are skipped."""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped.startswith("{"):
            continue
        try:
            value = json.loads(stripped)
        except ValueError:
            continue
        if isinstance(value, dict):
            yield value


def base_status(done: Any, *, failed: bool) -> AgentStatus:
    if done.stalled:
        return AgentStatus.STALLED
    if done.timed_out:
        return AgentStatus.TIMEOUT
    if done.interrupted:
        return AgentStatus.INTERRUPTED
    if failed or done.exit_code != 0:
        return AgentStatus.ERROR
    return AgentStatus.OK
