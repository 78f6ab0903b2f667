"""Each agent CLI's own state inside the sandbox, as its backend declares it
(`loopctl.backend_registry`: `state`, `history`, `nests_sandbox`).

Inside the sandbox the CLI writes its state (it logs in, keeps sessions), but never the user's
own: a private copy per loop and role (`Sandbox.cli_layer`) is bound in its place, so that hooks,
MCP servers, permissions or a CLAUDE.md an agent writes there reach neither the user's next
session, another loop, nor the checker. A CLI whose backend declares no state keeps the user's
read-only. What is not copied (`history`): transcripts and logs of the user's own sessions (large,
and never what a loop resumes: it resumes the sessions its own turns left in the private copy).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path

from loopctl import backend_registry, nofollow
from loopctl.sandbox.places import home_of, state_path, unique


def declared(cli: str | None) -> tuple[str, ...]:
    """The state places `cli`'s backend declares (`~/path`, `$NAME|default[:sub]`)."""
    spec = backend_registry.find(cli) if cli else None
    return spec.state if spec is not None else ()


def has_state(cli: str) -> bool:
    """Whether `cli` is an agent CLI with state of its own for the sandbox to copy."""
    return bool(declared(cli))


def nests_sandbox(cli: str | None) -> bool:
    """Whether `cli` confines its own tools with a nested bwrap (it keeps a user namespace)."""
    spec = backend_registry.find(cli) if cli else None
    return spec is not None and spec.nests_sandbox


def places(cli: str | None, env: Mapping[str, str]) -> list[Path]:
    """Where `cli` keeps its state, as the agent's environment names it."""
    home = home_of(env)
    return unique([state_path(spec, env, home) for spec in declared(cli)])


def make_places(cli: str | None, env: Mapping[str, str]) -> list[Path]:
    """`places`, made where missing: a CLI creates its state on first use, which it cannot do
    in a read-only home, so the folder (or an empty JSON settings file) is made for a writable
    bind to exist."""
    found = places(cli, env)
    for path in found:
        with contextlib.suppress(OSError):
            if path.name.endswith(".backup"):
                continue  # written only when there is something to back up
            if path.suffix == ".json":
                if not path.exists() and path.parent.is_dir():
                    path.write_text("{}\n", encoding="utf-8")
            elif not path.exists():
                path.mkdir(parents=True, exist_ok=True)
    return found


def copies(cli: str | None, layer: Path | None, env: Mapping[str, str]) -> dict[Path, Path | None]:
    """Each state place of `cli`, and the private copy in `layer` bound there: refreshed now
    from the user's own (newer files win), None when there is none (no layer, nothing to copy,
    or a copy that cannot be made), so that the user's place stays read-only."""
    home = home_of(env)
    found: dict[Path, Path | None] = dict.fromkeys(places(cli, env))
    if layer is None:
        return found
    try:
        # Its own (copies of credentials are kept there): made by loopctl, trusted.
        layer.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return found
    spec = backend_registry.find(cli) if cli else None
    skip = spec.history if spec is not None else frozenset()
    for place in found:
        if not place.exists():
            continue  # a backup file not written yet; a folder that could not be made
        copy = private_copy(layer, place, home)
        try:
            nofollow.refresh_copy(place, copy, within=layer, skip=skip)
        except OSError:
            continue  # read-only then: the CLI may complain, but nothing leaks
        found[place] = copy
    return found


def private_copy(layer: Path, place: Path, home: Path) -> Path:
    """Where `layer` keeps its copy of the state place `place`: `home/…` under `layer/home/`,
    any other path under `layer/root/`."""
    place, home = Path(os.path.abspath(place)), Path(os.path.abspath(home))
    if place.is_relative_to(home):
        return layer / "home" / place.relative_to(home)
    return layer / "root" / place.relative_to(place.anchor)
