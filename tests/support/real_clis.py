"""Driving the real Claude Code, Codex, opencode and aider CLIs from the tests.

The binaries come from `scripts/install-agent-clis` (pinned versions, installed outside the
repository). Where one is missing the test is skipped with the reason, unless
LOOPCTL_REQUIRE_REAL_CLIS=1 (CI sets it), which makes a missing CLI a failure.

Each run is hermetic: the test's own HOME, XDG and CODEX_HOME folders (conftest gives every test
a fresh HOME), stdin from /dev/null, the variables and config that stop each CLI's background
traffic (../shared/reference/real-clis.md), and — as root, where `unshare -n` works — a
loopback-only network namespace holding both loopctl and the scripted model server.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from support.cli import loopctl_argv
from support.model_server import Request, wire_of
from support.repos import FAST_CHECK, toml_value, write_config

HARNESS = Path(__file__).parent / "real_cli_harness.py"
# Read at import, before any test swaps HOME for its own.
REAL_HOME = Path.home()
CLIS = ("claude", "codex", "opencode", "aider")
API_KEY = "sk-loopctl-test-0123456789abcdef"
NETNS_PORT = 18080  # a fresh namespace has every port free
# Tested against these (scripts/install-agent-clis installs them).
VERSIONS = {
    "claude": "2.1.197",
    "codex": "0.171.0",
    "opencode": "1.18.33",
    "aider": "0.86.2",
}


def clis_folder() -> Path:
    given = os.environ.get("LOOPCTL_AGENT_CLIS")
    if given:
        return Path(given)
    return REAL_HOME / ".cache" / "loopctl" / "agent-clis"


CLIS_BIN = clis_folder() / "bin"


def require_cli(name: str) -> Path:
    """The CLI's binary, or a skip (a failure in CI) saying how to install it."""
    path = CLIS_BIN / name
    if path.exists():
        return path
    found = shutil.which(name)
    if found and name != "aider":  # a system aider may be any version; ours is pinned
        return Path(found)
    reason = f"the real {name} CLI is not installed: run scripts/install-agent-clis"
    if os.environ.get("LOOPCTL_REQUIRE_REAL_CLIS") == "1":
        pytest.fail(reason + " (LOOPCTL_REQUIRE_REAL_CLIS=1)")
    pytest.skip(reason)


@functools.cache
def netns_available() -> bool:
    """Root with a working `unshare -n`: runs can be sealed off from every other host."""
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    done = subprocess.run(
        ["unshare", "-n", "--", "ip", "link", "set", "lo", "up"],
        capture_output=True,
        stdin=subprocess.DEVNULL,
    )
    return done.returncode == 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Sandbox:
    """Where one test's model server listens, and the CLIs' hermetic configuration."""

    home: Path
    port: int
    sealed: bool  # in a loopback-only network namespace
    clis_bin: Path = CLIS_BIN  # where the CLIs are found (first on PATH)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def make_sandbox(clis_bin: Path = CLIS_BIN) -> Sandbox:
    sealed = netns_available()
    if not sealed and os.environ.get("LOOPCTL_REQUIRE_REAL_CLIS") == "1" and os.geteuid() == 0:
        pytest.fail("running as root but `unshare -n` does not work: cannot seal the network")
    port = NETNS_PORT if sealed else free_port()
    return Sandbox(Path(os.environ["HOME"]), port, sealed, clis_bin)


# --- the CLIs installed under /tmp ------------------------------------------------------------


def copy_tree(source: Path, target: Path) -> None:
    """`source` at `target`, links kept as links: hard links when both lie on one file system
    (the files are shared: never write one in place), a real copy otherwise."""
    linked = subprocess.run(
        ["cp", "-al", str(source), str(target)], capture_output=True, stdin=subprocess.DEVNULL
    )
    if linked.returncode != 0:
        shutil.rmtree(target, ignore_errors=True)
        subprocess.run(["cp", "-a", str(source), str(target)], check=True, stdin=subprocess.DEVNULL)


def install_copy(source: Path, target: Path) -> Path:
    """The installed CLIs at `target` as `scripts/install-agent-clis` would have left them
    there: aider's scripts name their own venv's interpreter in their `#!` line (the original
    install's, even in a copy of a copy), so theirs name the copy's. Returns the copy's `bin`."""
    copy_tree(source, target)
    scripts = target / "aider" / "bin"
    for script in scripts.iterdir() if scripts.is_dir() else []:
        if script.is_symlink() or not script.is_file():
            continue
        content = script.read_bytes()
        first, newline, rest = content.partition(b"\n")
        interpreter = Path(os.fsdecode(first[2:].strip()))
        if first.startswith(b"#!") and interpreter.parts[-3:-1] == ("aider", "bin"):
            mode = script.stat().st_mode
            script.unlink()  # a hard link to the user's own install: never rewritten in place
            own = os.fsencode(scripts / interpreter.name)
            script.write_bytes(b"#!" + own + newline + rest)
            script.chmod(mode)
    return target / "bin"


# --- per-CLI agent definitions and configuration ------------------------------------------------


def agent_toml(name: str, box: Sandbox, *, timeout: str = "120s", extra: str = "") -> str:
    """An agent file driving the real `name` CLI at the sandbox's model server."""
    common = f'description = "real {name}"\ntimeout = "{timeout}"\n'
    if name == "claude":
        body = f'backend = "claude"\nbase_url = "{box.url}"\nenv.allow = ["ANTHROPIC_API_KEY"]\n'
    elif name == "codex":
        # A slug codex knows, so it offers apply_patch and no "model metadata" warning item.
        body = (
            f'backend = "codex"\nmodel = "gpt-5.5"\nbase_url = "{box.url}/v1"\n'
            'env.allow = ["OPENAI_API_KEY"]\n'
        )
    elif name == "opencode":
        # opencode reads its provider's URL from its own config (OPENCODE_CONFIG); `base_url`
        # tells loopctl where that model endpoint is, so its egress proxy lets it through.
        body = (
            f'backend = "opencode"\nmodel = "fake/fake-model"\nbase_url = "{box.url}/v1"\n'
            'env.allow = ["OPENAI_API_KEY"]\n'
        )
    elif name == "aider":
        meta = box.home / "aider-models.json"
        args = ["--model-metadata-file", str(meta), "--edit-format", "diff", "--map-tokens", "0"]
        body = (
            f'backend = "aider"\nmodel = "openai/fake-model"\nbase_url = "{box.url}/v1"\n'
            f'env.allow = ["OPENAI_API_KEY"]\nargs = {toml_value(args)}\n'
        )
    else:
        raise ValueError(name)
    return common + body + extra


def cli_environment(name: str, box: Sandbox, **extra: str) -> dict[str, str]:
    """loopctl's environment for a run with `name`: the key, PATH, and the quiet settings."""
    require_cli(name)
    env = dict(os.environ)
    env["PATH"] = f"{box.clis_bin}{os.pathsep}{env['PATH']}"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if name == "claude":
        env["ANTHROPIC_API_KEY"] = API_KEY
    else:
        env["OPENAI_API_KEY"] = API_KEY
    if name == "codex":
        codex_home = box.home / "codex-home"
        codex_home.mkdir(exist_ok=True)
        (codex_home / "config.toml").write_text(
            "check_for_update_on_startup = false\n\n[analytics]\nenabled = false\n\n"
            "[features]\nplugins = false\nremote_plugin = false\napps = false\n"
        )
        env["CODEX_HOME"] = str(codex_home)
    if name == "opencode":
        config = box.home / "opencode.json"
        config.write_text(json.dumps(_opencode_config(box)))
        env["OPENCODE_CONFIG"] = str(config)
        env["OPENCODE_DISABLE_MODELS_FETCH"] = "1"
    if name == "aider":
        (box.home / "aider-models.json").write_text(json.dumps(_AIDER_MODELS))
        env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env.update(extra)
    return env


def _opencode_config(box: Sandbox) -> dict[str, Any]:
    return {
        "model": "fake/fake-model",
        "small_model": "fake/fake-model",
        "autoupdate": False,
        "share": "disabled",
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake",
                "options": {"baseURL": f"{box.url}/v1", "apiKey": "{env:OPENAI_API_KEY}"},
                "models": {
                    "fake-model": {
                        "name": "Fake Model",
                        "tool_call": True,
                        "limit": {"context": 128000, "output": 8192},
                        "cost": {"input": 3.0, "output": 15.0},
                    }
                },
            }
        },
    }


_AIDER_MODELS = {
    "openai/fake-model": {
        "max_input_tokens": 128000,
        "max_output_tokens": 8192,
        "input_cost_per_token": 3e-6,
        "output_cost_per_token": 1.5e-5,
        "litellm_provider": "openai",
        "mode": "chat",
    }
}


def use_real_maker(repo: Path, name: str, box: Sandbox, **agent: Any) -> None:
    """The real CLI as the default maker; "tests green" is the quick calc check."""
    (repo / "agents").mkdir(exist_ok=True)
    (repo / "agents" / f"real-{name}.toml").write_text(agent_toml(name, box, **agent))
    write_config(
        repo,
        f'version = 1\n\n[defaults]\nmaker = "real-{name}"\n\n'
        f'[conditions]\n"tests green" = {toml_value(FAST_CHECK)}\n',
    )


# --- running loopctl beside the model server ------------------------------------------------------


@dataclass
class SealedRun:
    done: subprocess.CompletedProcess[str]
    interfaces: list[str]
    requests: list[dict[str, Any]]
    # Who held a key variable when the first agent turn reached the server (with_census).
    census: list[dict[str, Any]] = field(default_factory=list)

    def posts(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["method"] == "POST"]

    def model_requests(self) -> list[Request]:
        """The recorded model calls, as the scripts saw them."""
        return [
            Request(wire_of(p["path"]) or "chat", p["path"], p["body"], p["headers"])
            for p in self.posts()
            if isinstance(p["body"], dict)
        ]


def run_sealed(
    repo: Path,
    box: Sandbox,
    env: dict[str, str],
    *args: str,
    script: str = "fix",
    queue: list[dict[str, Any]] | None = None,
    failures: list[dict[str, Any]] | None = None,
    key: str | None = API_KEY,
    timeout: float = 300,
    command: list[str] | None = None,
    wait_for_file: Path | None = None,
) -> SealedRun:
    """`loopctl ARGS` (or `command`) in `repo` beside the model server playing `script`, sealed
    in a loopback-only network namespace when possible."""
    control = box.home / "model-control.json"
    control.write_text(
        json.dumps({"script": script, "key": key, "queue": queue or [], "failures": failures or []})
    )
    log = box.home / "model-requests.jsonl"
    harness = [
        sys.executable,
        str(HARNESS),
        "--port",
        str(box.port),
        "--control",
        str(control),
        "--log",
        str(log),
        "--timeout",
        str(timeout),
    ]
    if box.sealed:
        harness = ["unshare", "-n", "--", *harness, "--netns"]
    done = subprocess.run(
        [*harness, "--", *(command or loopctl_argv(*args))],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=timeout + 30,
    )
    lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    assert lines, f"the harness wrote no request log:\n{done.stdout}\n{done.stderr}"
    return SealedRun(done, lines[0]["interfaces"], lines[1:], lines[0].get("census", []))
