"""Backend "aider": `aider --message-file PROMPT --yes-always --no-auto-commits …`.

aider prints text only, and exits 0 even when the model call failed (README.md, "Tested
against the real CLIs"): the status comes from its `litellm.*Error` lines and from whether any
`Tokens: …` line appeared. Its chat and input history go to the attempt folder, never the
worktree, and the repo-map cache it drops in the worktree is removed, so loopctl never commits
aider's own files. The "session" is the chat history file: `resume = true` restores it on the
next attempt.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from loopctl import nofollow
from loopctl.backend_registry import BackendSpec, register
from loopctl.backends.base import AgentRequest, AgentResult, AgentStatus
from loopctl.backends.presets import CliPreset, Invocation, base_status, stdout_text

_TOKENS = re.compile(
    r"^Tokens: (?P<sent>[\d.]+[kKmM]?) sent"
    r"(?:, (?P<write>[\d.]+[kKmM]?) cache write)?"
    r"(?:, (?P<hit>[\d.]+[kKmM]?) cache hit)?"
    r", (?P<received>[\d.]+[kKmM]?) received\."
    r"(?: Cost: \$(?P<message>[\d.]+) message, \$(?P<session>[\d.]+) session\.)?",
    re.M,
)
_FAILURE = re.compile(
    r"(litellm\.\w*Error|\w*AuthenticationError|APIConnectionError|"
    r"The API provider is not able to authenticate you)[^\n]*"
)
_HISTORY = "aider.chat.history.md"


def count(text: str | None) -> int:
    """aider's token counts: "2.4k" → 2400, "1.2M" → 1200000, "512" → 512."""
    if not text:
        return 0
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1].lower(), 1)
    number = text[:-1] if scale != 1 else text
    return round(float(number) * scale)


class AiderBackend(CliPreset):
    name = "aider"
    binary = "aider"
    install = "python -m pip install aider-install && aider-install"
    secret_names = (
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "OPENROUTER_API_KEY",
        "DEEPSEEK_API_KEY",
    )
    passthrough = ("OPENAI_API_BASE", "OPENAI_BASE_URL", "OLLAMA_API_BASE", "LITELLM_*")
    fixed_env: ClassVar[Mapping[str, str]] = {"TERM": "dumb"}
    # LiteLLM's variables; `base_url` is given as --openai-api-base instead.
    base_url_variables: ClassVar[Mapping[str, str]] = {
        "OPENAI_API_BASE": "https://api.openai.com/v1",
        "ANTHROPIC_API_BASE": "https://api.anthropic.com",
    }
    model_hosts = ("generativelanguage.googleapis.com", "openrouter.ai", "api.deepseek.com")
    # With no git identity configured aider writes a placeholder one into the repository's
    # config, which the sandbox keeps read-only (aider then crashes). An identity given through
    # the environment is found first; --no-auto-commits means it never signs anything.
    sandboxed_env: ClassVar[Mapping[str, str]] = {
        "GIT_CONFIG_COUNT": "2",
        "GIT_CONFIG_KEY_0": "user.name",
        "GIT_CONFIG_VALUE_0": "loopctl agent",
        "GIT_CONFIG_KEY_1": "user.email",
        "GIT_CONFIG_VALUE_1": "agent@loopctl.invalid",
    }

    def _history(self, request: AgentRequest) -> tuple[Path, bool]:
        """The chat history file, and whether it continues an earlier attempt's session."""
        folder = request.state_dir or request.stdout_path.parent
        earlier = request.session_id
        if request.agent.resume and earlier:
            candidate = Path(earlier)
            # The id comes from the event log; only a history file of this same task counts.
            task_folder = request.stdout_path.parent.parent.resolve()
            if (
                candidate.is_absolute()
                and candidate.name.endswith(_HISTORY)
                and candidate.is_file()
                and candidate.resolve().is_relative_to(task_folder)
            ):
                # Continued in this attempt's own folder: an earlier attempt's is read-only to
                # a sandboxed agent, and stays as that attempt left it. Both ends lie in
                # folders an agent wrote: the copy reads no link and writes through none.
                resumed = folder / f"{request.role}.{_HISTORY}"
                if candidate != resumed:
                    folder.mkdir(parents=True, exist_ok=True)
                    try:
                        history = nofollow.read_file(
                            candidate, within=request.stdout_path.parent.parent
                        )
                        nofollow.write_new(resumed, history, within=folder)
                    except (OSError, ValueError):
                        return resumed, False  # a planted link: a fresh session instead
                return resumed, True
        return folder / f"{request.role}.{_HISTORY}", False

    def invocation(self, request: AgentRequest) -> Invocation:
        agent = request.agent
        history, restore = self._history(request)
        folder = request.state_dir or request.stdout_path.parent
        argv = [
            "aider",
            "--message-file",
            str(request.prompt_file),
            "--yes-always",
            "--no-auto-commits",
            "--no-gitignore",
            "--no-check-update",
            "--analytics-disable",
            "--no-show-model-warnings",
            "--no-show-release-notes",
            "--no-pretty",
            "--no-stream",  # the Tokens line then carries the server's own usage
            "--input-history-file",
            str(folder / f"{request.role}.aider.input.history"),
            "--chat-history-file",
            str(history),
        ]
        if restore:
            argv.append("--restore-chat-history")
        if agent.model:
            argv += ["--model", agent.model]
        if agent.base_url:
            argv += ["--openai-api-base", agent.base_url]
        argv += list(agent.args)
        return Invocation(argv)

    def run(self, request: AgentRequest) -> AgentResult:
        before = _aider_files(request.worktree)
        try:
            return super().run(request)
        finally:
            for path in _aider_files(request.worktree) - before:
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)

    def parse(self, request: AgentRequest, done: Any) -> AgentResult:
        out = stdout_text(done)
        matches = list(_TOKENS.finditer(out))
        failure = _FAILURE.search(out + "\n" + done.stderr_tail)
        status = base_status(done, failed=failure is not None)
        extra: dict[str, Any] = {"turns": len(matches)}
        if status is AgentStatus.OK and not matches:
            status = AgentStatus.ERROR
            extra["error"] = "aider printed no Tokens line: the model never answered"
        if failure is not None:
            extra["error"] = failure.group(0)[:500]
        sent = sum(count(m["sent"]) for m in matches)
        hit = sum(count(m["hit"]) for m in matches)
        received = sum(count(m["received"]) for m in matches)
        costs = [m["session"] for m in matches if m["session"]]
        history, _ = self._history(request)
        return AgentResult(
            status=status,
            exit_code=done.exit_code,
            duration_s=done.duration_s,
            text=out.strip()[-4000:],
            input_tokens=sent if matches else None,
            output_tokens=received if matches else None,
            cached_tokens=hit if matches else None,
            # The last line's "session" figure is the running total of this invocation.
            cost_usd=float(costs[-1]) if costs else None,
            session_id=str(history) if history.exists() else None,
            output_tail=done.output_tail(4000),
            extra=extra,
        )


def _aider_files(worktree: Path) -> set[Path]:
    try:
        return {path for path in worktree.iterdir() if path.name.startswith(".aider")}
    except OSError:
        return set()


SPEC = register(
    BackendSpec(
        name="aider",
        factory=AiderBackend,
        executable="aider",
        preference=40,
        state=("~/.aider",),
    )
)
