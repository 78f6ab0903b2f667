"""`loopctl state pull` / `push`: a cloud clone's findings reach a laptop through a real remote."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.cli import invoke, run_loopctl
from support.delivery import inbox_items
from support.journal import events
from support.repos import git, make_project, write_loop

from loopctl.commands.state_sync import STATE_BRANCH, merge_logs
from loopctl.journal.events import Event, EventLog, encode_line
from loopctl.lock import RunnerLock
from loopctl.paths import ProjectPaths

LOOP = 'every = "1h"\ngoal = "tests green"\nprompt = "Make add() add."\n'


@pytest.fixture
def clones(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(remote, cloud, laptop): a bare remote and two clones of the calc project with a loop."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    seed = tmp_path / "seed"
    seed.mkdir()
    git(seed, "init", "-q", "-b", "main")
    make_project(seed, "fails.py")
    write_loop(seed, "nightly", LOOP)
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "a loop")
    git(seed, "push", "-q", str(remote), "main")
    cloud, laptop = tmp_path / "cloud", tmp_path / "laptop"
    for clone in (cloud, laptop):
        git(tmp_path, "clone", "-q", str(remote), str(clone))
    return remote, cloud, laptop


def _cli(monkeypatch: pytest.MonkeyPatch, repo: Path, *args: str) -> dict[str, Any]:
    result = invoke(monkeypatch, repo, *args, "--json")
    assert result.exit_code == 0, result.output
    payload: dict[str, Any] = json.loads(result.stdout)["state"]
    return payload


def _git_state(repo: Path) -> tuple[str, bytes, str, str]:
    """HEAD, the index bytes, tracked changes and local branches: what sync must not touch."""
    return (
        git(repo, "rev-parse", "HEAD"),
        (repo / ".git" / "index").read_bytes(),
        git(repo, "status", "--porcelain", "--untracked-files=no"),
        git(repo, "for-each-ref", "refs/heads"),
    )


def _identities(found: list[Event]) -> Counter[tuple[Any, ...]]:
    return Counter(
        (e.ts, e.type, e.run, e.task, json.dumps(dict(e.data), sort_keys=True)) for e in found
    )


def test_the_laptop_triages_what_the_cloud_run_found(
    monkeypatch: pytest.MonkeyPatch, clones: tuple[Path, Path, Path]
) -> None:
    remote, cloud, laptop = clones
    assert invoke(monkeypatch, cloud, "run", "nightly", "--once").exit_code == 1
    (failed,) = [i for i in inbox_items(monkeypatch, cloud) if i["kind"] == "failed"]

    pushed = _cli(monkeypatch, cloud, "state", "push")
    assert pushed["outcome"] == "pushed"
    assert pushed["sent"] == len(events(cloud)) > 0
    tree = git(remote, "ls-tree", "--name-only", STATE_BRANCH).split()
    assert sorted(tree) == ["INBOX.md", "STATE.md", "events.jsonl", "loopctl-state.json"]
    before = _git_state(laptop)

    pulled = _cli(monkeypatch, laptop, "state", "pull")

    assert pulled["outcome"] == "fast-forward"
    assert pulled["received"] == len(events(cloud))
    assert [i["id"] for i in inbox_items(monkeypatch, laptop)] == [failed["id"]]
    assert (laptop / ".loop" / "log" / "events.jsonl").read_bytes() == (
        cloud / ".loop" / "log" / "events.jsonl"
    ).read_bytes()
    assert failed["id"] in (laptop / ".loop" / "INBOX.md").read_text()
    assert "nightly" in (laptop / ".loop" / "STATE.md").read_text()
    assert _git_state(laptop) == before
    # The fast path (no typer) reads the pulled log too.
    fast = run_loopctl(laptop, "inbox", "--json")
    assert [i["id"] for i in json.loads(fast.stdout)["inbox"]] == [failed["id"]]
    # Pulling again changes nothing.
    assert _cli(monkeypatch, laptop, "state", "pull")["outcome"] == "up-to-date"


def test_both_sides_appended_nothing_is_lost_or_doubled(
    monkeypatch: pytest.MonkeyPatch, clones: tuple[Path, Path, Path]
) -> None:
    _remote, cloud, laptop = clones
    invoke(monkeypatch, cloud, "run", "nightly", "--once")
    _cli(monkeypatch, cloud, "state", "push")
    _cli(monkeypatch, laptop, "state", "pull")
    (item,) = inbox_items(monkeypatch, laptop)
    # The laptop dismisses the item while the cloud runs the loop again: both append.
    assert invoke(monkeypatch, laptop, "inbox", "dismiss", item["id"]).exit_code == 0
    invoke(monkeypatch, cloud, "run", "nightly", "--once")
    laptop_only = events(laptop)[len(events(laptop)) - 1 :]
    cloud_events = events(cloud)
    _cli(monkeypatch, cloud, "state", "push")
    expected = _identities(cloud_events) + _identities(laptop_only)

    pulled = _cli(monkeypatch, laptop, "state", "pull")

    assert pulled["outcome"] == "merged"
    assert pulled["rebased"] == 1
    merged = events(laptop)
    assert _identities(merged) == expected
    assert [e.seq for e in merged] == list(range(1, len(merged) + 1))
    assert merged[-1].type == "inbox_closed"  # the laptop's own event, after the cloud's
    # The dismissed item stays dismissed; the second run's new item is open.
    open_ids = [i["id"] for i in inbox_items(monkeypatch, laptop)]
    assert item["id"] not in open_ids
    assert len(open_ids) == 1

    # The laptop shares its decision; the cloud's next pull just appends it.
    assert _cli(monkeypatch, laptop, "state", "push")["sent"] == 1
    assert _cli(monkeypatch, cloud, "state", "pull")["outcome"] == "fast-forward"
    assert (cloud / ".loop" / "log" / "events.jsonl").read_bytes() == (
        laptop / ".loop" / "log" / "events.jsonl"
    ).read_bytes()


def test_push_merges_what_the_remote_gained_first(
    monkeypatch: pytest.MonkeyPatch, clones: tuple[Path, Path, Path]
) -> None:
    remote, cloud, laptop = clones
    invoke(monkeypatch, cloud, "run", "nightly", "--once")
    _cli(monkeypatch, cloud, "state", "push")
    invoke(monkeypatch, laptop, "run", "nightly", "--once")  # never pulled: no common events
    ours, theirs = len(events(laptop)), len(events(cloud))

    pushed = _cli(monkeypatch, laptop, "state", "push")

    assert pushed["outcome"] == "pushed"
    assert (pushed["received"], pushed["rebased"], pushed["sent"]) == (theirs, ours, ours)
    parents = git(remote, "rev-list", "--parents", "-n", "1", STATE_BRANCH).split()
    assert len(parents) == 2  # the new state commit follows the cloud's
    assert _cli(monkeypatch, cloud, "state", "pull")["received"] == ours


def test_a_merge_that_renumbers_waits_for_a_running_loop(
    monkeypatch: pytest.MonkeyPatch, clones: tuple[Path, Path, Path]
) -> None:
    _remote, cloud, laptop = clones
    invoke(monkeypatch, cloud, "run", "nightly", "--once")
    _cli(monkeypatch, cloud, "state", "push")
    invoke(monkeypatch, laptop, "run", "nightly", "--once")
    log = laptop / ".loop" / "log" / "events.jsonl"
    before = log.read_bytes()

    with RunnerLock(ProjectPaths(laptop).locks_dir, "nightly"):
        refused = invoke(monkeypatch, laptop, "state", "pull")

    assert refused.exit_code == 1
    assert "loop 'nightly'" in refused.output
    assert "stop it first" in refused.output
    assert log.read_bytes() == before
    assert invoke(monkeypatch, laptop, "state", "pull").exit_code == 0


def test_a_torn_local_tail_is_cut_before_the_remote_events_are_appended(
    monkeypatch: pytest.MonkeyPatch, clones: tuple[Path, Path, Path]
) -> None:
    _remote, cloud, laptop = clones
    invoke(monkeypatch, cloud, "run", "nightly", "--once")
    _cli(monkeypatch, cloud, "state", "push")
    log = laptop / ".loop" / "log" / "events.jsonl"
    log.parent.mkdir(parents=True)
    log.write_bytes(b'{"v": 1, "seq": 1, "ts": "2026')  # a writer died mid-line

    assert _cli(monkeypatch, laptop, "state", "pull")["outcome"] == "fast-forward"
    assert log.read_bytes() == (cloud / ".loop" / "log" / "events.jsonl").read_bytes()


def test_pull_without_state_and_an_unreachable_remote(
    monkeypatch: pytest.MonkeyPatch, clones: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    _remote, _cloud, laptop = clones
    assert _cli(monkeypatch, laptop, "state", "pull")["outcome"] == "no-remote-state"
    assert not (laptop / ".loop" / "log").exists()

    done = run_loopctl(laptop, "state", "push", "--remote", str(tmp_path / "missing.git"))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


# --- the merge itself ----------------------------------------------------------------------------


def _log(tmp_path: Path, name: str, kinds: list[str]) -> list[Event]:
    log = EventLog(tmp_path / name / "events.jsonl")
    for kind in kinds:
        log.append("note", data={"what": kind})
    return log.read()


@pytest.mark.parametrize(
    ("local", "remote", "received", "rebased", "order"),
    [
        ([], [], 0, 0, []),
        (["a"], [], 0, 1, ["a"]),
        ([], ["a", "b"], 2, 0, ["a", "b"]),
        (["a"], ["a", "b"], 1, 0, ["a", "b"]),
        (["a", "b"], ["a"], 0, 1, ["a", "b"]),
        (["a", "l"], ["a", "r1", "r2"], 2, 1, ["a", "r1", "r2", "l"]),
        (["l"], ["r"], 1, 1, ["r", "l"]),
    ],
)
def test_merge_logs(
    tmp_path: Path,
    local: list[str],
    remote: list[str],
    received: int,
    rebased: int,
    order: list[str],
) -> None:
    shared = _log(tmp_path, "shared", [k for k in local if k in remote])
    mine = [*shared, *_log(tmp_path, "mine", [k for k in local if k not in remote])]
    theirs = [*shared, *_log(tmp_path, "theirs", [k for k in remote if k not in local])]
    mine = [
        e.__class__(i + 1, e.ts, e.type, e.run, e.loop, e.task, e.data) for i, e in enumerate(mine)
    ]
    theirs = [
        e.__class__(i + 1, e.ts, e.type, e.run, e.loop, e.task, e.data)
        for i, e in enumerate(theirs)
    ]

    merge = merge_logs(mine, theirs)

    assert [e.data["what"] for e in merge.events] == order
    assert (merge.received, merge.rebased, merge.duplicates) == (received, rebased, 0)
    assert [e.seq for e in merge.events] == list(range(1, len(order) + 1))


def test_an_event_in_both_tails_is_kept_once(tmp_path: Path) -> None:
    (event,) = _log(tmp_path, "one", ["x"])
    other = _log(tmp_path, "two", ["y"])[0]
    copied = event.__class__(2, event.ts, event.type, event.run, event.loop, event.task, event.data)
    merge = merge_logs([event], [other, copied])
    assert merge.duplicates == 1
    assert [e.data["what"] for e in merge.events] == ["y", "x"]


def test_encode_line_gives_back_the_stored_bytes(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    log.append("note", run="r", loop="l", task="t", data={"text": "é ünïcode", "n": 1.5, "k": [1]})
    log.append("note", data={})
    assert b"".join(encode_line(e) for e in log.read()) == log.path.read_bytes()
