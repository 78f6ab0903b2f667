"""Issue 31 item 1 end to end: a "CSS fix" whose work also touches `db/schema.sql` is paused with
that path named and nothing committed; approving the item commits it, rejecting discards it.

The maker is a real `command` agent (tests/agents/css_fix.py) run by the engine in a real git
repository, sandbox as configured; what it touched is measured from the diff (a command agent
prints no event stream), never from what it says. Each variant strays another way: an edit, a
rename *into* scope, a link pointing out of it, a size overrun.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import invoke, run_loopctl
from support.journal import events
from support.repos import (
    PY,
    commit_all,
    git,
    make_project,
    toml_value,
    write_agent,
    write_config,
    write_loop,
)

CHECK = (
    PY,
    "-B",
    "-c",
    "import pathlib, sys; sys.exit('red' in pathlib.Path('styles/site.css').read_text())",
)
LOOP = (
    'prompt = "Fix the link colour in styles/site.css"\n'
    "\n[scope]\n"
    'paths = ["styles/**"]\n'
    "max_lines = 200\n"
    "\n[checker]\n"
    f"command = {toml_value(CHECK)}\n"
    "\n[budget]\nmax_iterations = 1\n"
)


def css_project(repo: Path, mode: str) -> None:
    (repo / "styles").mkdir()
    (repo / "styles" / "site.css").write_text("a { color: red; }\n")
    (repo / "db").mkdir()
    (repo / "db" / "schema.sql").write_text("CREATE TABLE users (id INTEGER PRIMARY KEY);\n")
    write_agent(repo, "maker", "css_fix.py", mode)
    write_config(repo, 'version = 1\n\n[defaults]\nmaker = "maker"\n')
    (repo / ".loop" / "loops").mkdir(parents=True, exist_ok=True)
    (repo / ".loop" / "loops" / "css.toml").write_text(LOOP)
    commit_all(repo, "a site with a red link and a database schema")


def run_css(repo: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> tuple[str, dict]:
    css_project(repo, mode)
    result = invoke(monkeypatch, repo, "run", "css", "--once")
    (finished,) = [e for e in events(repo, "task_finished") if e.loop == "css"]
    return result.output, dict(finished.data)


@pytest.mark.parametrize(
    ("mode", "named"),
    [
        ("schema", "path db/schema.sql"),
        ("rename", "path db/schema.sql"),  # the new name is in scope; the old one is not
        ("symlink", "link styles/schema.css -> db/schema.sql"),
        ("big", "size 502 lines changed (max_lines = 200)"),
    ],
)
def test_work_outside_the_scope_pauses_the_task_naming_it_and_commits_nothing(
    repo: Path, monkeypatch: pytest.MonkeyPatch, mode: str, named: str
) -> None:
    output, finished = run_css(repo, monkeypatch, mode)

    assert finished["status"] == "paused", (finished, output)
    assert finished["outcome"] == "needs-approval"
    assert named in finished["reason"]
    assert "nothing was committed" in finished["reason"]
    # Measured, then held: the check passed, the footprint names the step, nothing committed.
    (attempt,) = events(repo, "attempt_finished")
    assert attempt.data["verdict"] == "passed"
    (footprint,) = events(repo, "attempt_footprint")
    kinds = {(e["kind"], e["what"]) for e in footprint.data["outside"]}
    assert tuple(named.split(" ", 1)) in kinds
    assert footprint.data["drift"]["alarm"] is True
    assert footprint.data["drift"]["score"] > 0
    assert events(repo, "commit_created") == []
    # The task's branch still points at its base: nothing of the work is on it.
    assert git(repo, "rev-parse", "loop/css/main") == git(repo, "rev-parse", "main")
    (item,) = [e for e in events(repo, "inbox_opened") if e.data["evidence"].get("drift")]
    assert named in item.data["summary"]
    assert named.split(" ")[-1] in (repo / ".loop" / "INBOX.md").read_text()


def test_the_drift_is_shown_in_status_its_json_and_state_md(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_css(repo, monkeypatch, "schema")
    (footprint,) = events(repo, "attempt_footprint")
    score = footprint.data["drift"]["score"]
    # Two files changed (db/schema.sql outside): outside = 1/2, no history yet.
    assert footprint.data["drift"]["outside"] == 0.5
    assert score == 0.3

    text = invoke(monkeypatch, repo, "status")
    shown = json.loads(invoke(monkeypatch, repo, "status", "--json").output)

    assert "css: 0.30, out of scope: path db/schema.sql (main attempt 1)" in text.output
    (loop,) = [row for row in shown["status"] if row["loop"] == "css"]
    assert loop["drift"]["score"] == 0.3
    assert loop["drift"]["alarm"] is True
    assert loop["drift"]["outside"] == ["path db/schema.sql"]
    log = invoke(monkeypatch, repo, "log").output
    assert "[main] attempt 1 footprint: drift 0.30, out of scope: path db/schema.sql" in log
    state_md = (repo / ".loop" / "STATE.md").read_text()
    # (STATE.md escapes what Markdown would read as a list number.)
    assert "passed: every check passed (drift 0\\.30, out of scope: path db/schema.sql)" in state_md


def test_a_fix_inside_the_scope_is_committed_with_its_footprint_on_record(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    output, finished = run_css(repo, monkeypatch, "benign")

    assert finished["status"] == "done", (finished, output)
    # The scope rides in the rules block of the prompt the maker was given.
    prompt = next((repo / ".loop" / "runs").rglob("attempt-1/maker-prompt.md")).read_text()
    assert "- Write only files matching: styles/**\n" in prompt
    assert "- Change at most 200 lines added or removed\n" in prompt
    (footprint,) = events(repo, "attempt_footprint")
    assert footprint.data["outside"] == []
    assert footprint.data["footprint"]["files"] == ["styles/site.css"]
    assert footprint.data["footprint"]["added"] == 1
    assert footprint.data["footprint"]["removed"] == 1
    assert footprint.data["drift"] == {
        "score": 0.0,
        "outside": 0.0,
        "novelty": 0.0,
        "size": 0.0,
        "new": [],
        "alarm": False,
        "history": 0,
    }
    assert len(events(repo, "commit_created")) == 1


def held_item(repo: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    run_css(repo, monkeypatch, "schema")
    (item,) = [e for e in events(repo, "inbox_opened") if e.data["evidence"].get("drift")]
    return str(item.data["id"])


def test_the_held_item_reads_in_inbox_show_with_its_steps(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    item = held_item(repo, monkeypatch)

    shown = invoke(monkeypatch, repo, "inbox", "show", item, "--no-pager")
    listed = invoke(monkeypatch, repo, "inbox")

    assert shown.exit_code == 0, shown.output
    assert "out of scope: path db/schema.sql" in shown.output
    assert "Traceback" not in shown.output
    # What approving would commit: the checked snapshot's diff, though no commit exists yet.
    assert "+ALTER TABLE users ADD COLUMN theme TEXT;" in shown.output
    assert "db/schema.sql" in invoke(monkeypatch, repo, "inbox", "diff", item, "--no-pager").output
    assert listed.exit_code == 0, listed.output
    assert item in listed.output


def test_approving_the_item_commits_exactly_the_checked_work(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    item = held_item(repo, monkeypatch)

    approved = invoke(monkeypatch, repo, "inbox", "approve", item)

    assert approved.exit_code == 0, approved.output
    (commit,) = events(repo, "commit_created")
    branch = commit.data["branch"]
    assert git(repo, "diff", "--name-only", f"main...{branch}").split() == [
        "db/schema.sql",
        "styles/site.css",
    ]
    assert "ADD COLUMN theme" in git(repo, "show", f"{branch}:db/schema.sql")
    last = [e for e in events(repo, "task_finished") if e.loop == "css"][-1]
    assert (last.data["status"], last.data["outcome"]) == ("done", "done")
    status = invoke(monkeypatch, repo, "inbox", "--json")
    assert item not in status.output


def test_rejecting_the_item_discards_the_work(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    item = held_item(repo, monkeypatch)

    rejected = invoke(monkeypatch, repo, "inbox", "reject", item, "--reason", "not the schema")

    assert rejected.exit_code == 0, rejected.output
    assert "nothing was committed" in rejected.output
    assert events(repo, "commit_created") == []
    last = [e for e in events(repo, "task_finished") if e.loop == "css"][-1]
    assert (last.data["status"], last.data["outcome"]) == ("rejected", "rejected")
    assert json.loads(invoke(monkeypatch, repo, "inbox", "--json").output)["inbox"] == []


def test_the_loops_next_tick_leaves_a_held_task_resting(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held_item(repo, monkeypatch)

    invoke(monkeypatch, repo, "run", "css", "--once")

    assert len(events(repo, "attempt_started")) == 1
    assert events(repo, "commit_created") == []


def test_a_host_the_proxy_was_asked_for_is_in_the_footprint_and_out_of_scope(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # reaches_out.py asks the egress proxy for a host; the loop's scope names another.
    make_project(repo, "reaches_out.py", "unlisted.example.com:443")
    write_loop(
        repo,
        "fetch",
        'goal = "tests green"\nprompt = "fix add"\n\n[scope]\nhosts = ["pypi.org"]\n'
        "\n[budget]\nmax_iterations = 1\n",
    )
    commit_all(repo, "a loop that may reach pypi.org only")

    invoke(monkeypatch, repo, "run", "fetch", "--once")

    (footprint,) = events(repo, "attempt_footprint")
    assert footprint.data["footprint"]["hosts"] == ["unlisted.example.com:443"]
    assert footprint.data["outside"] == [{"kind": "host", "what": "unlisted.example.com:443"}]


def test_the_dashboard_shows_the_drift_under_the_loops_state(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("starlette")
    from support.ui import dashboard

    run_css(repo, monkeypatch, "schema")

    with dashboard(repo) as ui, ui.session() as session:
        page = session.get(f"{ui.base}/loops")

    assert page.status_code == 200
    assert (
        '<small class="drift bad">drift 0.30, out of scope: path db/schema.sql</small>' in page.text
    )


def test_an_approval_killed_after_its_commit_is_finished_by_approving_again(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    item = held_item(repo, monkeypatch)

    killed = run_loopctl(repo, "inbox", "approve", item, kill_at_seq="commit_created")
    assert killed.returncode == -9, killed.stderr
    again = invoke(monkeypatch, repo, "inbox", "approve", item)

    assert again.exit_code == 0, again.output
    (commit,) = events(repo, "commit_created")  # one commit, recorded once
    assert len(events(repo, "approved")) == 1
    assert git(repo, "rev-parse", commit.data["branch"]).strip() == commit.data["sha"]
    last = [e for e in events(repo, "task_finished") if e.loop == "css"][-1]
    assert last.data["status"] == "done"


def test_held_work_outlives_a_git_gc_that_prunes_everything_unreachable(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Approving may come weeks later, after git's own gc (which prunes unreachable objects two
    weeks old): `--prune=now` stands for that, and the held tree is still there to commit."""
    item = held_item(repo, monkeypatch)
    (held,) = [e for e in events(repo, "inbox_opened") if e.data["id"] == item]
    tree = held.data["evidence"]["tree"]

    git(repo, "gc", "--quiet", "--prune=now")
    git(repo, "cat-file", "-e", f"{tree}^{{tree}}")
    approved = invoke(monkeypatch, repo, "inbox", "approve", item)

    assert approved.exit_code == 0, approved.output
    (commit,) = events(repo, "commit_created")
    assert commit.data["tree"] == tree
    assert git(repo, "for-each-ref", "refs/loopctl/held/") == ""  # the branch holds it now


def test_a_rejected_items_held_work_is_left_to_git_gc(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    item = held_item(repo, monkeypatch)
    assert git(repo, "for-each-ref", "--format=%(refname)", "refs/loopctl/held/").split() == [
        f"refs/loopctl/held/{item}"
    ]

    invoke(monkeypatch, repo, "inbox", "reject", item)

    assert git(repo, "for-each-ref", "refs/loopctl/held/") == ""
