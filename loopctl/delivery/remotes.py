"""Where loopctl's network git goes: a remote's URLs read before any agent runs, then held to.

An agent that can write the repository's config can repoint a remote, so a push that looked the
name up after the agent ran would land wherever the agent chose. A run that may push reads its
remote's URLs when it starts, before any agent, and records them in `tick_started`; its
deliveries use those URLs and never the name again. `state pull/push` compare the remote with
the URLs the last run recorded. A user:password part never reaches the log: it is recorded
masked, and taken from config at push time only while the rest of the URL is unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopctl import git
from loopctl.errors import LoopctlError
from loopctl.journal.events import Event, EventType

if TYPE_CHECKING:
    from loopctl.definitions import Loop

PIN_FIELD = "push_remote"
_MASK = "***@"


class RemoteMoved(LoopctlError):
    """A remote no longer leads where it did before an agent ran (or was never recorded)."""


@dataclass(frozen=True, slots=True)
class RemotePin:
    """A remote's URLs as read before any agent ran, user:password parts masked."""

    name: str
    url: str | None  # where pushes go
    fetch_url: str | None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "url": self.url, "fetch_url": self.fetch_url}

    @classmethod
    def from_json(cls, data: object) -> RemotePin | None:
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            return None
        url, fetch_url = data.get("url"), data.get("fetch_url")
        return cls(
            data["name"],
            url if isinstance(url, str) else None,
            fetch_url if isinstance(fetch_url, str) else None,
        )


def read_pin(root: Path, name: str) -> RemotePin:
    """Where `name` leads now; call it before any agent runs."""
    push, fetch = git.remote_urls(root, name)
    return RemotePin(name, _shown(push), _shown(fetch))


def tick_fields(root: Path, loop: Loop) -> dict[str, Any]:
    """What `tick_started` records of the loop's push remote (nothing for a loop that never
    pushes)."""
    if not any(action.name == "push" for action in loop.deliver.actions):
        return {}
    return {PIN_FIELD: read_pin(root, loop.deliver.remote).to_json()}


def run_pin(events: Sequence[Event], run: str) -> RemotePin | None:
    """The remote `run` recorded when it started."""
    for event in events:
        if event.type == EventType.TICK_STARTED and event.run == run:
            return RemotePin.from_json(event.data.get(PIN_FIELD))
    return None


def push_url(root: Path, events: Sequence[Event], run: str, remote: str) -> str:
    """The URL a delivery of `run` pushes to: the one recorded before its agent ran."""
    pin = run_pin(events, run)
    if pin is None or pin.name != remote:
        raise RemoteMoved(
            f"run {run} recorded no URL for remote {remote!r} before its agent ran (it started"
            " before loopctl recorded them, or the loop's remote changed since); push by hand"
            " or run the loop again"
        )
    return _usable(root, pin, pin.url, fetch=False, when=f"run {run} started")


def sync_url(root: Path, events: Sequence[Event], remote: str, *, fetch: bool) -> str:
    """The URL `state pull/push` uses for `remote`, read once for the whole command.

    A URL or path the human typed is used as it is. A remote's name must still lead where the
    last run that pushed to it recorded before its agent ran.
    """
    push, fetched = git.remote_urls(root, remote)
    current = fetched if fetch else push
    if current is None:
        raise RemoteMoved(f"no remote named {remote!r} (`git remote -v` lists them)")
    if current == remote:
        return current
    pin = _latest_pin(events, remote)
    if pin is not None:
        for now, then in ((_shown(push), pin.url), (_shown(fetched), pin.fetch_url)):
            if then is not None and now != then:
                raise RemoteMoved(
                    f"remote {remote!r} now leads to {now}, but to {then} when a loop last"
                    " started (before its agent ran): an agent may have repointed it; check"
                    " `git remote -v`, then pass the URL you mean with --remote"
                )
    return current


def _usable(root: Path, pin: RemotePin, recorded: str | None, *, fetch: bool, when: str) -> str:
    if recorded is None:
        raise RemoteMoved(
            f"remote {pin.name!r} had no URL when {when} (before any agent ran); add it"
            " (`git remote add`) and run the loop again"
        )
    if _MASK not in recorded:
        return recorded
    # The recorded URL had a user:password part, which the log never holds: take today's URL
    # from config, but only while the rest of it is what was recorded.
    push, fetched = git.remote_urls(root, pin.name)
    current = fetched if fetch else push
    if current is None or git.display_url(current) != recorded:
        raise RemoteMoved(
            f"remote {pin.name!r} now leads to {_shown(current)}, not to {recorded} as when"
            f" {when} (before any agent ran); nothing was sent"
        )
    return current


def _latest_pin(events: Sequence[Event], name: str) -> RemotePin | None:
    for event in reversed(events):
        if event.type == EventType.TICK_STARTED:
            pin = RemotePin.from_json(event.data.get(PIN_FIELD))
            if pin is not None and pin.name == name:
                return pin
    return None


def _shown(url: str | None) -> str | None:
    return git.display_url(url) if url is not None else None
