"""`loopctl state pull` / `push`: share a repository's loop state through a git branch.

The state branch (`loopctl-state` on a remote) holds one commit per push whose tree has three
files: `events.jsonl` (the event log, the source of truth), `STATE.md` and `INBOX.md` (its
projections, for people browsing the branch), plus `loopctl-state.json` (the format version).
It is written with plumbing only (hash-object, mktree, commit-tree, push): the user's working
tree, index, HEAD and branches are never touched.

Merging follows from the log being append-only. Both sides share a prefix of events (what they
last synced); after it, the remote's events come first, then this clone's own new events, renumbered
after them. A push first merges what the remote gained, so the remote's log only ever grows and
an event, once pushed, keeps its sequence number everywhere: nothing is lost, nothing doubled.
Renumbering a log rewrites the file, so it is refused while a loop runs in this clone.

A sync reads the remote's URL once and uses it for every call (ls-remote, fetch, push), after
checking that a remote named by the user still leads where the last loop run recorded before
its agent ran (loopctl.delivery.remotes): an agent that repointed `origin` does not receive the log.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path

import msgspec

from loopctl import git
from loopctl.atomicfile import write_atomic
from loopctl.delivery import remotes
from loopctl.errors import GitError, LoopctlError
from loopctl.journal import history
from loopctl.journal.events import Event, EventLog, encode_line
from loopctl.journal.inbox import open_items, render_inbox_md
from loopctl.journal.state import write_state
from loopctl.lock import STATE_SYNC_LOCK, inbox_lock, read_holder, short_lock
from loopctl.paths import ProjectPaths, ensure_loop_gitignore

STATE_BRANCH = "loopctl-state"
STATE_FORMAT = 1
# Where a fetched state commit is kept: a private ref, invisible to `git branch`.
FETCHED_REF = "refs/loopctl/fetched-state"
LOG_FILE = "events.jsonl"
STATE_FILE = "STATE.md"
INBOX_FILE = "INBOX.md"
FORMAT_FILE = "loopctl-state.json"
_PUSH_TRIES = 3
# Locks in .loop/locks/ that are brief critical sections, not a running loop.
_SHORT_LOCKS = frozenset({"inbox", "worktrees", "state-sync"})


class SyncOutcome(StrEnum):
    NO_REMOTE_STATE = "no-remote-state"  # the remote has no state branch yet
    UP_TO_DATE = "up-to-date"
    FAST_FORWARD = "fast-forward"  # only the remote had new events: they were appended
    MERGED = "merged"  # both had: the remote's first, this clone's renumbered after them
    PUSHED = "pushed"


class SyncError(LoopctlError):
    """The state could not be synced (the message says what to do)."""


@dataclass(frozen=True, slots=True)
class LogMerge:
    """Two logs made one: the remote's events in order, then this clone's own new ones."""

    events: tuple[Event, ...]
    common: int  # events both logs already had, at the same place
    received: int  # the remote's events this clone lacked
    rebased: int  # this clone's events placed after them (renumbered)
    duplicates: int  # this clone's events the remote already had elsewhere (dropped)

    @property
    def rewrites_local(self) -> bool:
        """True when this clone's events change sequence numbers (the file is rewritten)."""
        return self.rebased > 0 and self.received > 0


@dataclass(frozen=True, slots=True)
class SyncResult:
    """What one `state pull` or `state push` did."""

    action: str  # pull | push
    remote: str
    branch: str
    outcome: SyncOutcome
    received: int = 0  # events taken from the remote
    rebased: int = 0  # local events renumbered after them
    duplicates: int = 0
    sent: int = 0  # events the remote gained (push)
    ahead: int = 0  # local events the remote does not have yet (pull)
    commit: str | None = None  # the state commit now on the remote
    events: int = 0  # events in the local log afterwards
    url: str | None = None  # where it went (any user:password part masked)

    def to_json(self) -> dict[str, object]:
        return {
            "action": self.action,
            "remote": self.remote,
            "url": self.url,
            "branch": self.branch,
            "outcome": self.outcome.value,
            "received": self.received,
            "rebased": self.rebased,
            "duplicates": self.duplicates,
            "sent": self.sent,
            "ahead": self.ahead,
            "commit": self.commit,
            "events": self.events,
        }


def merge_logs(local: Sequence[Event], remote: Sequence[Event]) -> LogMerge:
    """Merge two copies of an append-only log without losing or doubling an event."""
    common = 0
    for mine, theirs in zip(local, remote, strict=False):
        if mine.to_json() != theirs.to_json():
            break
        common += 1
    remote_tail = remote[common:]
    # An event can only be in both tails if a log was copied by hand; keep one copy.
    known = Counter(_identity(event) for event in remote_tail)
    kept: list[Event] = []
    duplicates = 0
    for event in local[common:]:
        key = _identity(event)
        if known[key]:
            known[key] -= 1
            duplicates += 1
            continue
        kept.append(event)
    start = len(remote)
    renumbered = [msgspec.structs.replace(event, seq=start + i + 1) for i, event in enumerate(kept)]
    return LogMerge(
        events=(*remote, *renumbered),
        common=common,
        received=len(remote_tail),
        rebased=len(kept),
        duplicates=duplicates,
    )


def pull(paths: ProjectPaths, remote: str = "origin") -> SyncResult:
    """Bring the remote's state branch into this clone's event log and projections."""
    root = paths.root
    with _sync_lock(paths):
        url = remotes.sync_url(root, EventLog(paths.events_file).read(), remote, fetch=True)
        shown = git.display_url(url)
        remote_sha = git.remote_branch_sha(root, url, STATE_BRANCH)
        if remote_sha is None:
            count = len(EventLog(paths.events_file).read())
            return SyncResult(
                "pull", remote, STATE_BRANCH, SyncOutcome.NO_REMOTE_STATE, events=count, url=shown
            )
        fetched = git.fetch_branch(root, url, STATE_BRANCH, FETCHED_REF)
        merge = _merge_into_local(paths, _remote_events(root, fetched))
        if merge.received == 0:
            outcome = SyncOutcome.UP_TO_DATE
        else:
            outcome = SyncOutcome.MERGED if merge.rebased else SyncOutcome.FAST_FORWARD
        return SyncResult(
            "pull",
            remote,
            STATE_BRANCH,
            outcome,
            received=merge.received,
            rebased=merge.rebased if merge.received else 0,
            duplicates=merge.duplicates,
            ahead=merge.rebased,
            commit=fetched,
            events=len(merge.events),
            url=shown,
        )


def push(paths: ProjectPaths, remote: str = "origin", *, author: str = "") -> SyncResult:
    """Merge what the remote gained, then publish this clone's state as a new commit on it."""
    root = paths.root
    name, email = _identity_of(author)
    with _sync_lock(paths):
        # The push URL for every call: the lease must be read where the push goes.
        url = remotes.sync_url(root, EventLog(paths.events_file).read(), remote, fetch=False)
        for _try in range(_PUSH_TRIES):
            remote_sha = git.remote_branch_sha(root, url, STATE_BRANCH)
            fetched = None
            received = rebased = duplicates = 0
            remote_count = 0
            if remote_sha is not None:
                fetched = git.fetch_branch(root, url, STATE_BRANCH, FETCHED_REF)
                theirs = _remote_events(root, fetched)
                remote_count = len(theirs)
                merge = _merge_into_local(paths, theirs)
                received, duplicates = merge.received, merge.duplicates
                rebased = merge.rebased if merge.received else 0
            events = EventLog(paths.events_file).read()
            _refresh_projections(paths, events)
            tree = _state_tree(paths, events)
            result = SyncResult(
                "push",
                remote,
                STATE_BRANCH,
                SyncOutcome.UP_TO_DATE,
                received=received,
                rebased=rebased,
                duplicates=duplicates,
                sent=len(events) - remote_count,
                commit=fetched,
                events=len(events),
                url=git.display_url(url),
            )
            if fetched is not None and git.tree_of(root, fetched) == tree:
                return replace(result, sent=0)
            message = (
                f"loopctl state: {len(events)} events\n\n"
                f"Pushed by `loopctl state push` from {socket.gethostname()}.\n"
            )
            commit = git.commit_tree(
                root,
                tree,
                [fetched] if fetched else [],
                message,
                author_name=name,
                author_email=email,
            )
            try:
                git.push_commit(root, url, commit, STATE_BRANCH, expect=fetched)
            except GitError:
                # Someone pushed in between (the lease refused): merge their events and retry.
                # Anything else (no access, no network) fails the same way again: report it.
                if git.remote_branch_sha(root, url, STATE_BRANCH) == fetched:
                    raise
                continue
            return replace(result, outcome=SyncOutcome.PUSHED, commit=commit)
    raise SyncError(
        f"{remote}'s {STATE_BRANCH} branch kept moving while this push merged it"
        f" ({_PUSH_TRIES} tries); run `loopctl state push` again"
    )


# --- the local side ------------------------------------------------------------------------------


def _merge_into_local(paths: ProjectPaths, remote_events: Sequence[Event]) -> LogMerge:
    """Merge the remote's events into the local log and re-render STATE.md and INBOX.md."""

    log = EventLog(paths.events_file)
    paths.log_dir.mkdir(parents=True, exist_ok=True)
    # The inbox lock first, as an inbox decision takes it before appending: no deadlock, and no
    # decision is taken on a log that is being replaced.
    with inbox_lock(paths.locks_dir), log.exclusive():
        local = log.read()
        merge = merge_logs(local, remote_events)
        if merge.received:
            if merge.rewrites_local:
                running = _running_loops(paths)
                if running:
                    raise SyncError(
                        f"both this clone ({merge.rebased} new events) and the remote"
                        f" ({merge.received} new events) recorded work since they last synced,"
                        f" and {running[0]} runs here: merging renumbers this clone's events,"
                        " so stop it first (`loopctl down`, or let the run finish), then run"
                        " `loopctl state pull` again"
                    )
                _replace_log(paths.events_file, merge.events)
            else:
                _append_events(paths.events_file, local, merge.events[len(local) :])
        events = list(merge.events)
    _refresh_projections(paths, events)
    return merge


def _append_events(path: Path, local: Sequence[Event], new: Sequence[Event]) -> None:
    """Append `new` after the `local` events, cutting a torn last line first (same file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    keep = sum(len(encode_line(event)) for event in local)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        os.ftruncate(fd, keep)
        os.lseek(fd, keep, os.SEEK_SET)
        data = b"".join(encode_line(event) for event in new)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _replace_log(path: Path, events: Sequence[Event]) -> None:

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, b"".join(encode_line(event) for event in events))


def _refresh_projections(paths: ProjectPaths, events: Sequence[Event]) -> None:
    """STATE.md and INBOX.md from the merged log, as the engine renders them."""

    paths.loop_dir.mkdir(parents=True, exist_ok=True)
    ensure_loop_gitignore(paths.loop_dir)  # the log it may have created is never committed
    write_state(paths.state_md, history.fold(events).values())
    write_atomic(paths.inbox_md, render_inbox_md(open_items(events)))


def _running_loops(paths: ProjectPaths) -> list[str]:
    """'loop NAME (pid N)' for each runner lock held in this clone (`up` included)."""

    running: list[str] = []
    if not paths.locks_dir.is_dir():
        return running
    for lock in sorted(paths.locks_dir.glob("*.lock")):
        if lock.stem in _SHORT_LOCKS:
            continue
        holder = read_holder(paths.locks_dir, lock.stem)
        if holder is not None and holder.get("pid") is not None:
            what = "loopctl up" if lock.stem == "_up" else f"loop {lock.stem!r}"
            running.append(f"{what} (pid {holder['pid']})")
    return running


@contextlib.contextmanager
def _sync_lock(paths: ProjectPaths) -> Iterator[None]:
    """One sync at a time per clone (a second one waits)."""

    with short_lock(paths.locks_dir, STATE_SYNC_LOCK):
        yield


# --- the branch side -----------------------------------------------------------------------------


def _remote_events(root: Path, commit: str) -> list[Event]:
    """The event log a state commit holds, read and checked like a local one."""
    version_text = git.read_blob(root, commit, FORMAT_FILE)
    if version_text is not None:
        try:
            version = json.loads(version_text).get("version")
        except (ValueError, AttributeError):
            version = None
        if not isinstance(version, int):
            raise SyncError(f"{STATE_BRANCH} {commit[:12]}: {FORMAT_FILE} is not loopctl's")
        if version > STATE_FORMAT:
            raise SyncError(
                f"{STATE_BRANCH} {commit[:12]} has state format {version}; this loopctl reads"
                f" {STATE_FORMAT}: upgrade loopctl"
            )
    text = git.read_blob(root, commit, LOG_FILE)
    if text is None:
        return []
    with tempfile.TemporaryDirectory(prefix="loopctl-state-") as folder:
        copy = Path(folder) / LOG_FILE
        copy.write_bytes(text.encode("utf-8", "surrogateescape"))
        return EventLog(copy).read()


def _state_tree(paths: ProjectPaths, events: Sequence[Event]) -> str:
    root = paths.root
    log_text = b"".join(encode_line(event) for event in events).decode("ascii")
    files = {
        LOG_FILE: log_text,
        STATE_FILE: _read_text(paths.state_md),
        INBOX_FILE: _read_text(paths.inbox_md),
        FORMAT_FILE: json.dumps({"version": STATE_FORMAT, "kind": "loopctl-state"}) + "\n",
    }
    return git.write_tree(root, {name: git.write_blob(root, text) for name, text in files.items()})


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="surrogateescape")
    except FileNotFoundError:
        return ""


def _identity_of(author: str) -> tuple[str, str]:
    text = author.strip() or "loopctl <loopctl@localhost>"
    if "<" in text and text.endswith(">"):
        name, _, email = text.partition("<")
        return name.strip() or "loopctl", email.rstrip(">").strip() or "loopctl@localhost"
    return text, "loopctl@localhost"


def _identity(event: Event) -> tuple[str, str, str | None, str | None, str | None, str]:
    data = json.dumps(dict(event.data), sort_keys=True, ensure_ascii=True)
    return (event.ts, event.type, event.run, event.loop, event.task, data)
