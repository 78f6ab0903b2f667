"""One registry of agent backends (issue 28 item 2): every reader agrees with it, and a backend
added at run time is seen by the definitions, the sandbox, `init`, the live view and traces,
with nothing else naming it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loopctl import backend_registry, sandbox
from loopctl.backend_registry import BackendSpec
from loopctl.backends import backend_for
from loopctl.backends.streams import render
from loopctl.commands.init import detect_agent_clis, planned_files
from loopctl.definitions.agents import Agent, Backend, load_toml_agent
from loopctl.definitions.source import Problems
from loopctl.journal.spans import provider_name
from loopctl.paths import TEMPLATES

CLIS = [spec.name for spec in backend_registry.clis()]


def _agent_file(folder: Path, backend: str) -> tuple[Agent | None, Problems]:
    path = folder / "agents" / "one.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'backend = "{backend}"\nmodel = "m"\n', encoding="utf-8")
    problems = Problems()
    return load_toml_agent(path, problems, default_backend=None), problems


def _box(tmp_path: Path, cli: str) -> sandbox.Sandbox:
    root, worktree = tmp_path / "repo", tmp_path / "work"
    root.mkdir(exist_ok=True)
    worktree.mkdir(exist_ok=True)
    return sandbox.Sandbox(
        mechanism="bwrap",
        program="bwrap",
        root=root,
        worktree=worktree,
        cli=cli,
        cli_layer=tmp_path / "layer",
    )


def test_the_built_in_backends_are_registered_as_the_code_names_them() -> None:
    names = backend_registry.names()
    for constant in ("CLAUDE", "CODEX", "OPENCODE", "AIDER", "GOOSE", "COMMAND", "OPENAI"):
        assert getattr(Backend, constant) in names, constant
    assert Backend.ANTHROPIC in names
    # init's preference among the built-in CLIs (a new one declares its own place)
    built_in = ["claude", "codex", "opencode", "aider", "goose"]
    assert [name for name in CLIS if name in built_in] == built_in


@pytest.mark.parametrize("name", backend_registry.names())
def test_every_backend_is_made_and_loaded_under_its_own_name(name: str, tmp_path: Path) -> None:
    agent, problems = _agent_file(tmp_path, name)
    if name == "command":  # a program of one's own: argv is required
        assert any("argv" in problem.message for problem in problems.errors)
        return
    assert problems.errors == []
    assert agent is not None
    assert agent.backend == name
    assert backend_for(agent).name == name


@pytest.mark.parametrize("name", CLIS)
def test_every_cli_has_state_in_the_sandbox_and_an_init_entry(name: str, tmp_path: Path) -> None:
    spec = backend_registry.specs()[name]
    assert spec.executable is not None
    assert sandbox.cli_state.has_state(name)
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home)}
    places = sandbox.cli_state.places(name, env)
    assert places
    assert set(places) <= set(_box(tmp_path, name).writable_paths(env))
    assert detect_agent_clis(lambda program: "/bin/x" if program == spec.executable else None) == (
        name,
    )
    files = planned_files((name,))
    for role in ("maker", "checker"):
        packaged = TEMPLATES.joinpath("agents", f"{name}-{role}.toml")
        expected = spec.templates.get(role) or packaged.read_text(encoding="utf-8")
        assert files[f".loop/agents/{name}-{role}.toml"] == expected


@pytest.mark.parametrize("name", backend_registry.names())
def test_traces_and_the_live_view_read_what_each_backend_declares(name: str) -> None:
    spec = backend_registry.specs()[name]
    assert provider_name(name, None) == (spec.provider or name)
    if spec.renderer is not None:
        assert render(name, '{"type": "nothing-a-renderer-knows"}') != (
            '{"type": "nothing-a-renderer-knows"}'
        )


def test_codex_alone_keeps_a_user_namespace() -> None:
    nesting = [name for name in backend_registry.names() if sandbox.cli_state.nests_sandbox(name)]
    assert nesting == ["codex"]


def test_two_backends_of_one_name_are_refused() -> None:
    claude = backend_registry.specs()["claude"]
    assert backend_registry.register(claude) is claude  # a module imported twice
    with pytest.raises(ValueError, match="two agent backends are named 'claude'"):
        backend_registry.register(BackendSpec(name="claude", factory=object))


# --- a backend added at run time, as a new module would add it ------------------------------


class _DemoBackend:
    name = "demo-cli"


def _demo_line(event: dict[str, Any]) -> str | None:
    return f"demo says {event.get('say')}"


@pytest.fixture
def demo() -> Iterator[BackendSpec]:
    spec = backend_registry.register(
        BackendSpec(
            name="demo-cli",
            factory=_DemoBackend,
            executable="demo",
            preference=5,
            templates={"maker": 'backend = "demo-cli"\n', "checker": 'backend = "demo-cli"\n'},
            state=("~/.demo", "$DEMO_HOME|~/.config:demo"),
            history=frozenset({"sessions"}),
            renderer=_demo_line,
            provider="demo-provider",
        )
    )
    yield spec
    backend_registry.unregister("demo-cli")


def test_a_registered_backend_reaches_every_reader(demo: BackendSpec, tmp_path: Path) -> None:
    agent, problems = _agent_file(tmp_path, "demo-cli")
    assert problems.errors == []
    assert agent is not None
    assert isinstance(backend_for(agent), _DemoBackend)
    assert detect_agent_clis(
        lambda program: "/bin/x" if program in ("demo", "claude") else None
    ) == (
        "demo-cli",
        "claude",
    )
    assert (
        planned_files(("demo-cli",))[".loop/agents/demo-cli-maker.toml"] == 'backend = "demo-cli"\n'
    )
    assert render("demo-cli", '{"say": "hi"}') == "demo says hi"
    assert provider_name("demo-cli", "other/model") == "demo-provider"
    assert sandbox.cli_state.has_state("demo-cli")
    assert not sandbox.cli_state.nests_sandbox("demo-cli")


def test_a_registered_clis_state_is_a_private_writable_copy(
    demo: BackendSpec, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    (home / ".demo" / "sessions").mkdir(parents=True)
    (home / ".demo" / "settings.json").write_text("{}\n", encoding="utf-8")
    env = {"HOME": str(home)}
    box = _box(tmp_path, "demo-cli")

    assert {home / ".demo", home / ".config" / "demo"} <= set(box.writable_paths(env))
    copies = box.state_copies(env)
    copy = copies[home / ".demo"]
    assert copy is not None
    assert (copy / "settings.json").is_file()
    assert not (copy / "sessions").exists()  # its history stays the user's
    args = box.bwrap_args(box.worktree, env, "/bin/true")
    assert ["--bind", str(copy), str(home / ".demo")] == args[args.index(str(copy)) - 1 :][:3]


def test_an_unknown_backend_is_still_an_error_naming_the_registered_ones(tmp_path: Path) -> None:
    agent, problems = _agent_file(tmp_path, "claud")
    assert agent is None
    (message,) = [problem.message for problem in problems.errors]
    assert message.startswith("'backend' must be one of claude, codex, opencode, aider, goose")
    assert "not 'claud'" in message
    assert "did you mean 'claude'" in message


def test_threads_asking_at_once_each_see_every_backend() -> None:
    """In a fresh interpreter (this one has loaded them all): the first questions, asked from
    eight threads at once, each get the whole registry, never the part imported so far."""
    program = (
        "import threading\n"
        "from loopctl import backend_registry\n"
        "seen = []\n"
        "threads = [threading.Thread(target=lambda: seen.append(len(backend_registry.names())))"
        " for _ in range(8)]\n"
        "[t.start() for t in threads]\n"
        "[t.join() for t in threads]\n"
        "print(sorted(set(seen)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"[{len(backend_registry.names())}]"
