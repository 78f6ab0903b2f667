"""Every agent backend, as it declares itself: the one list the rest of loopctl reads.

A backend module in `loopctl/backends/` declares, beside its class, one `BackendSpec` passed to
`register`: the name agent files write (`backend = "claude"`), how to make the backend, and what
the layers that never import it need: the sandbox its CLI's state folders, the live view its
stream renderer, `init` its executable and agent templates, traces its provider. Adding a
backend is adding its module; nothing else names it.

This module sits at the bottom of the layers so that the sandbox, the definitions and the
journal can read it. It finds the declarations by importing every module of `loopctl/backends/`
on the first question asked (never at import: `--help` and `--version` load no backend), the
one place a lower layer reaches an upper one, by name and at run time, as a plugin loader does.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Where the declaring modules live (the `loopctl.backends` package, not imported from here).
_PACKAGE = "loopctl.backends"
_FOLDER = Path(__file__).with_name("backends")

Renderer = Callable[[dict[str, Any]], str | None]


@dataclass(frozen=True, slots=True)
class BackendSpec:
    """What one backend tells the rest of loopctl about itself."""

    name: str  # as agent files write it: `backend = "<name>"`
    # Makes the backend (a `loopctl.backends.AgentBackend`; typed loosely here, below it).
    factory: Callable[[], object]
    # The program an agent CLI runs as (`init` looks for it on PATH); None: not a CLI.
    executable: str | None = None
    # `init`'s order of preference among the CLIs it finds (lower first: the default maker).
    preference: int = 100
    # `init`'s example agents, role -> TOML text; empty: `templates/agents/<name>-<role>.toml`.
    templates: Mapping[str, str] = field(default_factory=dict)
    # The CLI's own state, which the sandbox gives it as a private writable copy
    # (`sandbox.cli_state`): `~/path`, or `$NAME|default[:sub]` read from the agent's
    # environment. Without it the CLI's state stays read-only inside the sandbox.
    state: tuple[str, ...] = ()
    # Names at the top of a state folder not copied into the private one (transcripts, logs).
    history: frozenset[str] = frozenset()
    # The CLI confines its own tools with a nested bwrap: it keeps the right to a user namespace.
    nests_sandbox: bool = False
    # Turns one JSON line of its output into a short line for a person (`backends/streams.py`).
    renderer: Renderer | None = None
    # `gen_ai.provider.name` in traces; None: read from the model's "provider/" prefix.
    provider: str | None = None

    @property
    def is_cli(self) -> bool:
        return self.executable is not None


_REGISTERED: dict[str, BackendSpec] = {}
_DISCOVERED: list[bool] = []  # non-empty once every backend module has been imported
_DISCOVERING = threading.RLock()  # re-entrant: a module being imported may ask too


def register(spec: BackendSpec) -> BackendSpec:
    """Add `spec` (a backend module does it at import); a second backend of one name is an
    error, the same spec again (a module imported twice) is not."""
    known = _REGISTERED.get(spec.name)
    if known is not None and known != spec:
        raise ValueError(f"two agent backends are named {spec.name!r}")
    _REGISTERED[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Forget a backend registered at run time (tests that add one take it away again)."""
    _REGISTERED.pop(name, None)


def specs() -> Mapping[str, BackendSpec]:
    """Every backend, by name."""
    if not _DISCOVERED:
        # Once, and whole before anyone reads it: a turn's sandbox built in one thread while
        # another renders a line must not see half the backends (a CLI's state read-only).
        with _DISCOVERING:
            if not _DISCOVERED:
                for module in sorted(info.name for info in pkgutil.iter_modules([str(_FOLDER)])):
                    importlib.import_module(f"{_PACKAGE}.{module}")
                _DISCOVERED.append(True)
    return dict(_REGISTERED)


def find(name: str) -> BackendSpec | None:
    return specs().get(name)


def names() -> tuple[str, ...]:
    """Every backend's name, as agent files may write it (CLIs first, in `init`'s order)."""
    ordered = sorted(specs().values(), key=lambda spec: (not spec.is_cli, spec.preference))
    return tuple(spec.name for spec in ordered)


def clis() -> tuple[BackendSpec, ...]:
    """The agent CLIs, in `init`'s order of preference."""
    return tuple(spec for name in names() if (spec := specs()[name]).is_cli)
