"""The triage inbox end to end: gated delivery, approve/reject/retry/dismiss/reply, escalation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import assert_clean_exit, invoke, loopctl_argv, run_loopctl
from support.delivery import action, inbox_items, ledger_entries, ship_loop, the_approval
from support.fake_gh import fake_gh, gh_calls, gh_state
from support.journal import events
from support.repos import add_remote, git, make_project, remote_refs, write_agent, write_loop

from loopctl.commands.inbox_show import InboxError, find_item
from loopctl.definitions import load_project
from loopctl.delivery.gates import asked_question
from loopctl.journal.events import EventLog
from loopctl.journal.inbox import InboxItem
from loopctl.lock import RunnerLock
from loopctl.paths import ProjectPaths

BRANCH = "loop/ship/main"


def gated_run(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, deliver: str) -> Path:
    make_project(repo, "fixer.py")
    remote = add_remote(repo, tmp_path)
    ship_loop(repo, deliver)
    result = invoke(monkeypatch, repo, "run", "ship", "--once")
    assert result.exit_code == 0, result.output
    return remote


def test_approve_pushes_exactly_the_commit_it_showed(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = gated_run(repo, tmp_path, monkeypatch, 'actions = ["commit", "push"]')
    (commit,) = events(repo, "commit_created", "main")
    sha = commit.data["sha"]
    item = the_approval(monkeypatch, repo)
    # Policy default: push waits for a human although the loop wrote no `approve`.
    assert item["evidence"]["action"] == "push"
    assert remote_refs(remote) == {}
    state_md = (repo / ".loop" / "STATE.md").read_text()
    assert "awaiting_approval" in state_md
    assert item["id"] in (repo / ".loop" / "INBOX.md").read_text()

    shown = invoke(monkeypatch, repo, "inbox", "show", item["id"][:4])
    assert shown.exit_code == 0, shown.output
    assert f"Awaiting approval: push {sha[:12]} to origin as branch {BRANCH}" in shown.stdout
    assert "calc.py" in shown.stdout  # the diff stat
    assert "1: passed" in shown.stdout

    approved = invoke(monkeypatch, repo, "inbox", "approve", item["id"], "--note", "lgtm")
    assert approved.exit_code == 0, approved.output
    assert remote_refs(remote) == {f"refs/heads/{BRANCH}": sha}
    assert inbox_items(monkeypatch, repo) == []
    (closed,) = [i for i in inbox_items(monkeypatch, repo, "--all") if i["kind"] == "approval"]
    assert closed["resolution"] == "approved"
    types = [e.type for e in events(repo) if e.task == "main"]
    assert types.index("approved") < types.index("action_started") < types.index("action_finished")
    (granted,) = events(repo, "approved")
    assert granted.data["sha"] == sha
    assert granted.data["note"] == "lgtm"
    assert events(repo, "task_finished", "main")[-1].data["status"] == "done"
    assert "### `main` — done" in (repo / ".loop" / "STATE.md").read_text()
    assert "Nothing needs you." in (repo / ".loop" / "INBOX.md").read_text()


# A caller that runs loopctl's CLI in its own process with the Temporal SDK already imported.
_IN_PROCESS = """
import sys
import temporalio  # loaded, never used: no loop of this clone is on Temporal
from loopctl.__main__ import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(f"returned {code}")
"""


@pytest.mark.parametrize("decision", [("approve", "--note", "ok"), ("reject", "--reason", "no")])
def test_a_decision_made_here_returns_even_where_the_temporal_sdk_is_loaded(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, decision: tuple[str, ...]
) -> None:
    """Only a decision sent to Temporal as a signal leaves without interpreter teardown: with
    the SDK merely imported (an earlier command, a test in the same process), an approval made
    here returns to its caller rather than ending the caller's whole process."""
    pytest.importorskip("temporalio")  # the `temporal` extra, which `dev` installs
    remote = gated_run(repo, tmp_path, monkeypatch, 'actions = ["commit", "push"]')
    item = the_approval(monkeypatch, repo)

    done = subprocess.run(
        [sys.executable, "-c", _IN_PROCESS, "inbox", decision[0], item["id"], *decision[1:]],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("returned 0"), done.stdout + done.stderr
    assert bool(remote_refs(remote)) == (decision[0] == "approve")


def test_reject_closes_the_task_without_delivery(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = gated_run(repo, tmp_path, monkeypatch, 'actions = ["commit", "push"]')
    item = the_approval(monkeypatch, repo)

    rejected = invoke(monkeypatch, repo, "inbox", "reject", item["id"], "--reason", "not now")

    assert rejected.exit_code == 0, rejected.output
    assert remote_refs(remote) == {}
    finished = events(repo, "task_finished", "main")[-1]
    assert finished.data["status"] == "rejected"
    assert "not now" in finished.data["reason"]
    assert events(repo, "action_started") == []
    again = run_loopctl(repo, "inbox", "approve", item["id"])
    assert_clean_exit(again, 1)
    assert again.stderr.strip() == (
        f"loopctl: inbox item {item['id']} is already closed"
        f" (rejected, {events(repo, 'inbox_closed')[-1].ts[:19]})"
    )


def test_approval_is_refused_when_the_branch_moved(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = gated_run(repo, tmp_path, monkeypatch, 'actions = ["commit", "push"]')
    item = the_approval(monkeypatch, repo)
    moved = git(repo, "commit-tree", f"{BRANCH}^{{tree}}", "-p", BRANCH, "-m", "sneaky").strip()
    git(repo, "update-ref", f"refs/heads/{BRANCH}", moved)

    refused = run_loopctl(repo, "inbox", "approve", item["id"])

    assert_clean_exit(refused, 1)
    assert refused.stderr.startswith("loopctl: approval refused: branch loop/ship/main moved from")
    assert remote_refs(remote) == {}
    (still,) = inbox_items(monkeypatch, repo)
    assert "moved" in (still["refused"] or "")
    assert "approval refused" in (repo / ".loop" / "INBOX.md").read_text()


def test_an_approval_given_while_the_loop_runs_is_delivered_by_that_loop(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = gated_run(repo, tmp_path, monkeypatch, 'actions = ["commit", "push"]')
    item = the_approval(monkeypatch, repo)
    sha = events(repo, "commit_created", "main")[0].data["sha"]
    paths = ProjectPaths(repo)

    with RunnerLock(paths.locks_dir, "ship"):  # a tick of `ship` is running
        queued = invoke(monkeypatch, repo, "inbox", "approve", item["id"])
        assert queued.exit_code == 0, queued.output
        assert "delivers it when its current tick ends" in queued.stdout
        assert remote_refs(remote) == {}
        second = invoke(monkeypatch, repo, "inbox", "approve", item["id"])
        assert second.exit_code == 1
        assert "already approved" in second.output

    # The loop's next tick delivers the approval before it reworks the task.
    ticked = invoke(monkeypatch, repo, "run", "ship", "--once")
    assert ticked.exit_code == 0, ticked.output
    assert remote_refs(remote)[f"refs/heads/{BRANCH}"] == sha
    assert len(events(repo, "action_started")) == 1


def test_explicit_empty_approve_waives_the_gate_and_validate_warns(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    remote = add_remote(repo, tmp_path)
    ship_loop(repo, 'actions = ["commit", "push"]\napprove = []')

    checked = run_loopctl(repo, "validate")
    assert_clean_exit(checked, 0)
    assert (
        ".loop/loops/ship.toml:6: warning: action 'push' runs without a human's approval"
        in checked.stdout
    )
    result = invoke(monkeypatch, repo, "run", "ship", "--once")

    assert result.exit_code == 0, result.output
    assert f"refs/heads/{BRANCH}" in remote_refs(remote)
    assert inbox_items(monkeypatch, repo) == []


def test_ids_are_short_and_a_unique_prefix_works(tmp_path: Path) -> None:
    def item(item_id: str, closed: bool = False) -> InboxItem:
        return InboxItem(
            item_id, "failed", "l", "t", "r", "2026-01-01T00:00:00+00:00", "s",
            closed="2026-01-02T00:00:00+00:00" if closed else None,
            resolution="dismissed" if closed else None,
        )  # fmt: skip

    found = [item("abcdef"), item("abcxyz"), item("qqqqqq", closed=True), item("abcdefg")]
    assert find_item(found, "abcx").id == "abcxyz"
    assert find_item(found, "ABCDEF").id == "abcdef"  # exact beats the longer id it prefixes
    with pytest.raises(InboxError, match="ambiguous: it starts abcdef, abcxyz, abcdefg"):
        find_item(found, "abc")
    with pytest.raises(InboxError, match="no inbox item 'zz' \\(open items: abcdef"):
        find_item(found, "zz")
    with pytest.raises(InboxError, match="already closed \\(dismissed, 2026-01-02T00:00:00\\)"):
        find_item(found, "qqq")
    with pytest.raises(InboxError, match="no inbox item ''"):
        find_item(found, "")


def test_unknown_ids_and_wrong_kinds_are_one_clear_line(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "never_fixes.py")
    failed = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")
    assert failed.exit_code == 1
    (item,) = inbox_items(monkeypatch, repo)

    for argv in (
        ("approve", "zzzzzz"),
        ("approve", item["id"]),  # a failed item is not an approval
        ("reject", item["id"]),
        ("reply", item["id"], "yes"),
        ("show", "0"),
    ):
        done = run_loopctl(repo, "inbox", *argv)
        assert_clean_exit(done, 1)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    dismissed = run_loopctl(repo, "inbox", "dismiss", item["id"][:3])
    assert_clean_exit(dismissed, 0)
    assert inbox_items(monkeypatch, repo) == []
    again = run_loopctl(repo, "inbox", "dismiss", item["id"])
    assert_clean_exit(again, 1)
    assert "already closed (dismissed" in again.stderr


def test_retry_runs_a_failed_task_again_with_a_fresh_budget(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "never_fixes.py")
    write_loop(
        repo, "tidy", 'goal = "tests green"\nprompt = "fix add"\n\n[budget]\nmax_iterations = 1\n'
    )
    failed = invoke(monkeypatch, repo, "run", "tidy", "--once")
    assert failed.exit_code == 1
    (item,) = inbox_items(monkeypatch, repo)
    assert item["kind"] == "failed"
    write_agent(repo, "maker", "fixer.py")  # the human fixed what made it fail

    retried = invoke(monkeypatch, repo, "inbox", "retry", item["id"])

    assert retried.exit_code == 0, retried.output
    assert "retried" in retried.stdout
    runs = events(repo, "tick_started")
    assert [r.data["kind"] for r in runs] == ["tick", "requeue"]
    assert events(repo, "task_finished", "main")[-1].data["status"] == "done"
    assert [e.data["attempt"] for e in events(repo, "attempt_started", "main")] == [1, 1]
    assert inbox_items(monkeypatch, repo) == []
    (closed,) = inbox_items(monkeypatch, repo, "--all")
    assert closed["resolution"] == "retried"


def test_an_escalation_pauses_the_task_and_the_reply_reaches_the_next_prompt(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prompts = tmp_path / "prompts.txt"
    make_project(repo, "asks.py", prompts)
    write_loop(repo, "tidy", 'goal = "tests green"\nprompt = "fix add"\n')

    paused = invoke(monkeypatch, repo, "run", "tidy", "--once")

    assert paused.exit_code == 1, paused.output
    (item,) = inbox_items(monkeypatch, repo)
    assert item["kind"] == "escalation"
    assert item["evidence"]["question"] == "Should add() return a + b, or is a - b intended?"
    assert events(repo, "task_finished", "main")[-1].data["status"] == "awaiting_reply"
    assert events(repo, "check_finished") == []  # a question is not a failed attempt
    shown = invoke(monkeypatch, repo, "inbox", "show", item["id"])
    assert "The agent asks:" in shown.stdout

    replied = invoke(monkeypatch, repo, "inbox", "reply", item["id"], "return a + b")

    assert replied.exit_code == 0, replied.output
    assert events(repo, "task_finished", "main")[-1].data["status"] == "done"
    first, second = prompts.read_text().split("\n=====\n")[:2]
    assert "A human answered" not in first
    assert "# A human answered your question" in second
    assert "You asked: Should add() return a + b, or is a - b intended?" in second
    assert "Answer: return a + b" in second
    assert inbox_items(monkeypatch, repo) == []


def test_dismissing_an_escalation_stops_its_task_and_approvals_cannot_be_dismissed(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "asks.py", tmp_path / "prompts.txt")
    write_loop(repo, "tidy", 'goal = "tests green"\nprompt = "fix add"\n')
    invoke(monkeypatch, repo, "run", "tidy", "--once")
    (item,) = inbox_items(monkeypatch, repo, "--kind", "escalation", "--loop", "tidy")

    assert invoke(monkeypatch, repo, "inbox", "dismiss", item["id"]).exit_code == 0
    assert events(repo, "task_finished", "main")[-1].data["status"] == "stopped"
    assert inbox_items(monkeypatch, repo, "--kind", "approval") == []
    bad = invoke(monkeypatch, repo, "inbox", "--kind", "approvals")
    assert bad.exit_code == 2
    assert "--kind must be one of approval, failed, escalation, unhandled" in bad.output


def test_pr_and_merge_go_through_gh_after_each_approval(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = fake_gh(tmp_path, monkeypatch)
    remote = gated_run(
        repo,
        tmp_path,
        monkeypatch,
        'actions = ["commit", "push", "pr", "merge"]\napprove = ["push", "merge"]',
    )
    sha = events(repo, "commit_created", "main")[0].data["sha"]
    push_item = the_approval(monkeypatch, repo)
    assert push_item["evidence"]["then"] == [
        "open or update a pull request from loop/ship/main into main",
        "then `merge` waits for another approval",
    ]

    first = invoke(monkeypatch, repo, "inbox", "approve", push_item["id"])

    assert first.exit_code == 0, first.output
    assert remote_refs(remote) == {f"refs/heads/{BRANCH}": sha}
    (pr,) = gh_state(tmp_path)["prs"]
    assert (pr["head"], pr["base"], pr["state"]) == (BRANCH, "main", "OPEN")
    assert pr["title"] == "fix add"
    assert "attempt 1: passed" in pr["body"]
    merge_item = the_approval(monkeypatch, repo)
    assert merge_item["evidence"]["action"] == "merge"
    assert events(repo, "task_finished", "main")[-1].data["status"] == "awaiting_approval"

    second = invoke(monkeypatch, repo, "inbox", "approve", merge_item["id"])

    assert second.exit_code == 0, second.output
    assert gh_state(tmp_path)["prs"][0]["state"] == "MERGED"
    commands = [" ".join(c[:2]) for c in gh_calls(calls)]
    assert commands.count("pr create") == 1
    assert commands.count("pr merge") == 1
    (merge,) = [c for c in gh_calls(calls) if c[:2] == ["pr", "merge"]]
    assert f"--match-head-commit={sha}" in merge
    assert events(repo, "task_finished", "main")[-1].data["status"] == "done"
    # The log says what each step ran, on which commit, and on whose approval (the traces,
    # `status` and the ref checks read it there).
    started = [
        (e.data["action"], e.data["commit"], e.data["gated"], e.data["approval"])
        for e in events(repo, "action_started", "main")
    ]
    assert started == [
        ("push", sha, True, push_item["id"]),
        ("pr", sha, False, None),
        ("merge", sha, True, merge_item["id"]),
    ]


def test_a_failing_gh_fails_the_delivery_into_the_inbox(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_gh(tmp_path, monkeypatch, fail="pr create")
    gated_run(repo, tmp_path, monkeypatch, 'actions = ["commit", "pr"]\napprove = ["pr"]')
    item = the_approval(monkeypatch, repo)

    approved = invoke(monkeypatch, repo, "inbox", "approve", item["id"])

    assert approved.exit_code == 1
    assert "gh pr create failed: GraphQL: something went wrong" in approved.output
    (failed,) = inbox_items(monkeypatch, repo)
    assert failed["kind"] == "failed"
    assert failed["evidence"]["stage"] == "deliver"
    assert events(repo, "task_finished", "main")[-1].data["status"] == "failed"


def test_merge_without_a_pr_fast_forwards_the_base_branch(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gated_run(repo, tmp_path, monkeypatch, 'actions = ["commit", "merge"]')
    sha = events(repo, "commit_created", "main")[0].data["sha"]
    item = the_approval(monkeypatch, repo)

    assert invoke(monkeypatch, repo, "inbox", "approve", item["id"]).exit_code == 0

    assert git(repo, "rev-parse", "main").strip() == sha
    assert "a + b" in (repo / "calc.py").read_text()  # the checked-out branch moved with its files


def test_a_custom_action_runs_in_the_worktree_once_approved(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("DEPLOY_SECRET", "hunter2-hunter2")
    gated_run(repo, tmp_path, monkeypatch, f'actions = ["commit", {action(ledger, "deploy")}]')
    item = the_approval(monkeypatch, repo)
    assert ledger_entries(ledger) == []
    shown = invoke(monkeypatch, repo, "inbox", "show", item["id"]).stdout
    assert "Awaiting approval: run `" in shown
    assert "record_action.py" in shown

    assert invoke(monkeypatch, repo, "inbox", "approve", item["id"]).exit_code == 0

    (entry,) = ledger_entries(ledger)
    sha = events(repo, "commit_created", "main")[0].data["sha"]
    assert (entry["name"], entry["task"], entry["commit"]) == ("deploy", "main", sha)
    assert entry["cwd"] != str(repo)  # the task's worktree, not the user's checkout
    assert entry["secret_seen"] is False


def test_a_custom_action_gets_the_projects_allowed_secret_and_its_output_is_kept(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deploy that needs a token the user allowed in [env] gets it (and nothing else the
    sandboxless action could leak); what it printed is kept in the run's folder."""
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("DEPLOY_SECRET", "hunter2-hunter2")
    gated_run(repo, tmp_path, monkeypatch, f'actions = ["commit", {action(ledger, "deploy")}]')
    config = repo / ".loop" / "config.toml"
    config.write_text(config.read_text() + '\n[env]\nallow = ["DEPLOY_SECRET"]\n')
    item = the_approval(monkeypatch, repo)

    assert invoke(monkeypatch, repo, "inbox", "approve", item["id"]).exit_code == 0

    (entry,) = ledger_entries(ledger)
    assert entry["secret_seen"] is True
    (out,) = (repo / ".loop" / "runs" / item["run"] / "main").glob("deliver-*-deploy.out")
    assert out.read_text() == "deploy done\n"


def test_a_custom_action_that_hangs_is_stopped_and_fails_the_delivery(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loopctl.delivery.steps import custom

    monkeypatch.setattr(custom, "CUSTOM_TIMEOUT", 1.0)
    hang = [sys.executable, "-c", "import time; time.sleep(3600)"]
    deploy = '{ name = "deploy", argv = ' + json.dumps(hang) + " }"
    gated_run(repo, tmp_path, monkeypatch, f'actions = ["commit", {deploy}]')
    item = the_approval(monkeypatch, repo)

    approved = invoke(monkeypatch, repo, "inbox", "approve", item["id"])

    assert approved.exit_code == 1
    assert "`deploy` timed out" in approved.output
    assert events(repo, "task_finished", "main")[-1].data["status"] == "failed"


def test_listing_flags_work_in_the_fast_path_and_in_typer(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gated_run(repo, tmp_path, monkeypatch, 'actions = ["commit", "push"]')
    fast = run_loopctl(repo, "inbox", "--json")
    fast_again = run_loopctl(repo, "inbox", "--json")  # from the projection cache
    slow = invoke(monkeypatch, repo, "inbox", "--json", "--loop", "ship")

    assert_clean_exit(fast, 0)
    assert fast.stdout == fast_again.stdout
    assert json.loads(fast.stdout) == json.loads(slow.stdout)
    assert (repo / ".loop" / "cache" / "inbox-open.json").exists()
    assert inbox_items(monkeypatch, repo, "--loop", "other") == []
    table = run_loopctl(repo, "inbox")
    assert_clean_exit(table, 0)
    assert table.stdout.splitlines()[0].split() == [
        "ID", "KIND", "OUTCOME", "STATE", "LOOP", "TASK", "AGE", "SUMMARY"
    ]  # fmt: skip
    digest = run_loopctl(repo, "inbox", "--digest")
    assert_clean_exit(digest, 0)
    assert "Waiting for you (1):" in digest.stdout
    assert "- ship: runs 1 done; tasks 1 awaiting_approval" in digest.stdout


def test_the_projection_cache_follows_the_log(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gated_run(repo, tmp_path, monkeypatch, 'actions = ["commit", "push"]')
    before = json.loads(run_loopctl(repo, "inbox", "--json").stdout)["inbox"]
    assert len(before) == 1
    cache = repo / ".loop" / "cache" / "inbox-open.json"
    key, _, body = cache.read_bytes().partition(b"\n")
    # Mark the cached listing, to see when it is served.
    cache.write_bytes(key + b"\n" + body.replace(b'"kind": "approval"', b'"kind": "CACHED"'))
    log = EventLog(ProjectPaths(repo).events_file)

    log.append("note", data={"what": "nothing for the inbox"})
    carried = json.loads(run_loopctl(repo, "inbox", "--json").stdout)["inbox"]
    assert carried[0]["kind"] == "CACHED"  # the log only grew, and not by an inbox event
    log.append("inbox_closed", data={"id": before[0]["id"], "resolution": "dismissed"})
    rebuilt = run_loopctl(repo, "inbox", "--json")

    assert json.loads(rebuilt.stdout)["inbox"] == []
    cache.write_bytes(b"v1:garbage\n{}")
    assert json.loads(run_loopctl(repo, "inbox", "--json", "--all").stdout)["inbox"]
    assert json.loads(run_loopctl(repo, "inbox", "--json").stdout)["inbox"] == []


def test_inbox_outside_a_repository_is_one_clear_line(tmp_path: Path) -> None:
    done = subprocess.run(
        loopctl_argv("inbox", "show", "abc"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert_clean_exit(done, 1)
    assert "not a git repository" in done.stderr


def test_project_loads_for_actions_even_with_a_broken_unrelated_loop(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = gated_run(repo, tmp_path, monkeypatch, 'actions = ["commit", "push"]')
    write_loop(repo, "broken", "this is = not toml [")
    assert load_project(repo).errors
    item = the_approval(monkeypatch, repo)

    assert invoke(monkeypatch, repo, "inbox", "approve", item["id"]).exit_code == 0
    assert f"refs/heads/{BRANCH}" in remote_refs(remote)


def test_an_approval_an_agent_asked_for_is_decided_without_a_delivery(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = EventLog(ProjectPaths(repo).events_file)
    for item_id, command in (("agt001", "git push"), ("agt002", "rm -rf build")):
        log.append(
            "inbox_opened",
            run="r1",
            loop="tidy",
            task="main",
            data={
                "id": item_id,
                "kind": "approval",
                "summary": f"approve running `{command}` (asked by the agent)",
                "evidence": {"action": "run", "command": command},
            },
        )

    approved = invoke(monkeypatch, repo, "inbox", "approve", "agt001")
    rejected = invoke(monkeypatch, repo, "inbox", "reject", "agt002", "--reason", "no")

    assert approved.exit_code == 0, approved.output
    assert "approved agt001 (git push); run the loop again" in approved.stdout
    assert rejected.exit_code == 0, rejected.output
    (granted,) = events(repo, "approved")
    assert (granted.data["id"], granted.data["sha"]) == ("agt001", None)
    resolutions = {e.data["id"]: e.data["resolution"] for e in events(repo, "inbox_closed")}
    assert resolutions == {"agt001": "approved", "agt002": "rejected"}


@pytest.mark.parametrize(
    ("escalate", "text", "question"),
    [
        ("Which base?", "", "Which base?"),
        (None, 'I am stuck.\n{"escalate": "Drop Python 3.8?"}\n', "Drop Python 3.8?"),
        (None, '{"escalate": "   "}', None),
        (None, '{"escalate": 3}', None),
        (None, '{"escalate": "not last"}\ndone', None),
        ("", "all good", None),
    ],
)
def test_a_question_comes_from_the_protocol_or_the_final_line(
    escalate: str | None, text: str, question: str | None
) -> None:
    assert asked_question(escalate, text) == question


def test_a_task_waiting_for_approval_is_not_reworked_by_the_next_tick(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gated_run(repo, tmp_path, monkeypatch, 'actions = ["commit", "push"]')
    item = the_approval(monkeypatch, repo)

    again = invoke(monkeypatch, repo, "run", "ship", "--once")

    assert again.exit_code == 0, again.output
    assert len(events(repo, "attempt_started", "main")) == 1
    skipped = events(repo, "task_finished", "main")[-1]
    assert skipped.data["status"] == "skipped"
    assert skipped.data["reason"] == f"waits for a human: inbox approval {item['id']}"
    assert the_approval(monkeypatch, repo)["id"] == item["id"]  # still open, still approvable


def test_inbox_md_keeps_task_text_with_nested_backticks_inside_its_fences() -> None:
    """Backtick runs of any length in agent or task text never close loopctl's own fences, so
    nothing after them renders as a heading of INBOX.md."""
    from markdown_it import MarkdownIt

    from loopctl.journal.inbox import InboxItem, render_inbox_md

    hostile = "use ``` here\n````\n# Approved: safe to merge\n`````"
    item = InboxItem(
        id="abc123",
        kind="failed",
        loop="fix",
        task="t-1",
        run="r",
        opened="2026-12-01T00:00:00+00:00",
        summary="task `x` with ``` and ````",
        evidence={"question": hostile, "check_tail": hostile},
    )
    html = MarkdownIt("commonmark").render(render_inbox_md([item]))
    headings = [line for line in html.splitlines() if line.startswith(("<h1", "<h2"))]
    assert headings == ["<h1>Inbox</h1>", "<h2>abc123 · failed · fix/t-1</h2>"]
    assert "# Approved: safe to merge" in html  # kept, as text inside a code block
