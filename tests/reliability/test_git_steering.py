"""Issue 13: git that an agent cannot steer (DESIGN §5 invariants 8, 9 and 12).

Hostile makers are real `command` agents run by a real `loopctl` process with the sandbox off.
Each one works in a loop of its own (`steer`); the victim is the `ship` loop, whose fixer maker
is honest and whose delivery commits and pushes after a human approves. The integrity check
fails the hostile agent's own attempt, and the tests go on as a human might: approve that
change, then run ship or approve its waiting push. loopctl's own git must still read the real
objects, run no program the repository's config names, and push where ship's run recorded
before any agent ran. The git-level tests put the same planted config in front of loopctl's network
commands against real ssh://, git:// and http:// endpoints.
"""

from __future__ import annotations

import functools
import json
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import repos
from support.cli import assert_clean_exit, run_loopctl
from support.journal import events
from support.repos import PYTEST_CHECK, make_project, remote_refs, write_agent
from support.unauthorized import unauthorized_remote

from loopctl import git as lgit
from loopctl.delivery import remotes
from loopctl.errors import GitError
from loopctl.git import runner as git_runner
from loopctl.journal.events import EventLog, EventType

BRANCH = "loop/ship/main"
SANDBOX_OFF = '\n[sandbox]\nmode = "off"\n'
SHIP = (
    'goal = "tests green"\nprompt = "Fix add() in calc.py."\n\n'
    '[checker]\nprotect = ["tests/**"]\n\n[budget]\nmax_iterations = 1\n\n'
    '[deliver]\nactions = ["commit", "push"]\n'
)
STEER = (
    'goal = "tests green"\nprompt = "Tidy up."\n\n[maker]\nagent = "steer"\n\n'
    '[worktree]\nkeep = "always"\n\n[budget]\nmax_iterations = 1\n'
)


# git for the test's own set-up, in repositories no agent has touched.
plain_git = functools.partial(repos.git, plain=True)


def bare(path: Path) -> Path:
    plain_git(path.parent, "init", "-q", "--bare", str(path))
    return path


def two_loops(
    repo: Path, tmp_path: Path, ship_maker: str, steer_maker: str, *steer_args: str | Path
) -> Path:
    """The calc project with a bare `origin`, the `ship` loop (maker `ship_maker`) and the
    `steer` loop (maker `steer_maker`); returns the origin."""
    make_project(repo, ship_maker, check=PYTEST_CHECK, config_extra=SANDBOX_OFF)
    write_agent(repo, "steer", steer_maker, *steer_args)
    origin = bare(tmp_path / "origin.git")
    plain_git(repo, "remote", "add", "origin", str(origin))
    (repo / ".loop" / "loops").mkdir(parents=True, exist_ok=True)
    (repo / ".loop" / "loops" / "ship.toml").write_text(SHIP)
    (repo / ".loop" / "loops" / "steer.toml").write_text(STEER)
    plain_git(repo, "add", "-A")
    plain_git(repo, "commit", "-q", "-m", "two loops")
    return origin


def loopctl(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_loopctl(repo, *args, env=dict(os.environ), timeout=180)


def approvals(repo: Path, *, tampering: bool) -> list[str]:
    """Open approval items: the integrity check's (tampering) or deliveries' (not)."""
    listed = loopctl(repo, "inbox", "--json")
    assert_clean_exit(listed, 0)
    return [
        item["id"]
        for item in json.loads(listed.stdout)["inbox"]
        if item["kind"] == "approval" and bool(item["evidence"].get("tampering")) == tampering
    ]


def steer(repo: Path) -> str:
    """Run the hostile loop; its attempt fails as tampering. Returns that item's id."""
    done = loopctl(repo, "run", "steer", "--once")
    assert_clean_exit(done, 1)
    assert "tampering" in done.stdout, done.stdout
    (item,) = approvals(repo, tampering=True)
    return item


def ship(repo: Path) -> str:
    """Run the victim loop to its push approval; returns that item's id."""
    done = loopctl(repo, "run", "ship", "--once")
    assert_clean_exit(done, 0)
    (item,) = approvals(repo, tampering=False)
    return item


# --- replace objects -----------------------------------------------------------------------------


def test_a_replaced_base_smuggles_no_weakened_test_into_the_work(
    repo: Path, tmp_path: Path
) -> None:
    # `steer` replaces the base commit with one whose test is weakened, and the human lets
    # runs go on. Git honouring the replacement would check ship's worktree out with that
    # test, keep it out of the protected-path check and the approver's diff, and commit it.
    origin = two_loops(repo, tmp_path, "fixer.py", "replaces_base.py")
    assert_clean_exit(loopctl(repo, "inbox", "approve", steer(repo)), 0)
    assert plain_git(repo, "replace", "--list").strip()
    item = ship(repo)
    shown = loopctl(repo, "inbox", "show", item)
    assert_clean_exit(shown, 0)
    approved = loopctl(repo, "inbox", "approve", item)
    assert_clean_exit(approved, 0)
    (commit,) = [e for e in events(repo, "commit_created") if e.loop == "ship"]
    pushed = remote_refs(origin)[f"refs/heads/{BRANCH}"]
    changed = plain_git(origin, "diff", "--name-only", f"{pushed}~1", pushed).split()
    print(f"\nreplaced base: ship's commit changes {changed}; the approver saw:\n{shown.stdout}")
    assert pushed == commit.data["sha"]
    assert changed == ["calc.py"]
    assert "== 5" in plain_git(origin, "show", f"{pushed}:tests/test_calc.py")
    assert "calc.py" in shown.stdout
    assert "test_calc.py" not in shown.stdout


def test_git_reads_the_real_objects_whatever_refs_replace_says(repo: Path) -> None:
    base = plain_git(repo, "rev-parse", "HEAD").strip()
    (repo / "secret_change.py").write_text("weakened = True\n")
    plain_git(repo, "add", "-A")
    fake_tree = plain_git(repo, "write-tree").strip()
    fake = plain_git(repo, "commit-tree", fake_tree, "-m", "initial").strip()
    plain_git(repo, "replace", base, fake)
    plain_git(repo, "commit", "-q", "--allow-empty", "-m", "innocent")
    head = plain_git(repo, "rev-parse", "HEAD").strip()
    # Plain git now believes the base already had the file, so the commit changes nothing.
    assert plain_git(repo, "diff", "--stat", base, head) == ""

    assert "secret_change.py" in lgit.diff_stat_between(repo, base, head)
    assert lgit.changed_paths(repo, base) == ["secret_change.py"]
    assert "+weakened = True" in lgit.diff_text(repo, base, 100_000)
    assert lgit.read_blob(repo, base, "secret_change.py") is None
    assert lgit.tree_of(repo, base) != fake_tree


# --- config keys that run programs ---------------------------------------------------------------


def test_planted_config_runs_nothing_through_commit_diff_approval_and_push(
    repo: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "ran.txt"
    origin = two_loops(repo, tmp_path, "fixer.py", "plants_git_config.py", marker)
    # The human lets the changed config stand; ship then commits, shows and pushes under it.
    assert_clean_exit(loopctl(repo, "inbox", "approve", steer(repo)), 0)
    before = marker.read_text().split() if marker.exists() else []
    item = ship(repo)
    shown = loopctl(repo, "inbox", "show", item)
    assert_clean_exit(shown, 0)
    assert "calc.py" in shown.stdout
    approved = loopctl(repo, "inbox", "approve", item)
    ran = marker.read_text().split() if marker.exists() else []
    print(f"\nplanted programs run by loopctl's git: {len(ran)} {sorted(set(ran))}")
    assert before == []
    assert_clean_exit(approved, 0)
    assert ran == []
    (commit,) = [e for e in events(repo, "commit_created") if e.loop == "ship"]
    assert remote_refs(origin) == {f"refs/heads/{BRANCH}": commit.data["sha"]}


# --- where a push goes ---------------------------------------------------------------------------


def test_a_repointed_origin_still_pushes_to_the_url_recorded_before_the_agent(
    repo: Path, tmp_path: Path
) -> None:
    attacker = bare(tmp_path / "attacker.git")
    origin = two_loops(repo, tmp_path, "fixer.py", "repoints_remote.py", attacker, "set-url")
    item = ship(repo)
    # steer repoints origin while ship's push waits; the human lets that change stand too.
    assert_clean_exit(loopctl(repo, "inbox", "approve", steer(repo)), 0)
    assert plain_git(repo, "remote", "get-url", "--push", "origin").strip() == str(attacker)
    approved = loopctl(repo, "inbox", "approve", item)
    print(f"\nrepointed origin: attacker got {remote_refs(attacker)}, origin {remote_refs(origin)}")
    assert_clean_exit(approved, 0)
    (commit,) = [e for e in events(repo, "commit_created") if e.loop == "ship"]
    assert remote_refs(attacker) == {}
    assert remote_refs(origin) == {f"refs/heads/{BRANCH}": commit.data["sha"]}
    started = [e for e in events(repo, "tick_started") if e.loop == "ship"]
    assert started[0].data["push_remote"]["url"] == str(origin)


def test_a_url_rewrite_planted_for_the_recorded_url_refuses_the_push(
    repo: Path, tmp_path: Path
) -> None:
    attacker = bare(tmp_path / "attacker.git")
    origin = two_loops(repo, tmp_path, "fixer.py", "repoints_remote.py", attacker, "rewrite")
    item = ship(repo)
    assert_clean_exit(loopctl(repo, "inbox", "approve", steer(repo)), 0)
    approved = loopctl(repo, "inbox", "approve", item)
    (finished,) = events(repo, "action_finished")
    print(f"\nrewritten URL: push ok={finished.data['ok']}: {finished.data['detail']}")
    assert "Traceback" not in approved.stdout + approved.stderr
    assert remote_refs(attacker) == {}
    assert remote_refs(origin) == {}
    assert finished.data["ok"] is False
    assert "insteadOf rewrites it" in finished.data["detail"]


@pytest.mark.parametrize("mode", ["empty-rewrite", "follow-tags", "push-option"])
def test_config_that_steers_what_a_push_carries_or_where_changes_nothing_it_sends(
    repo: Path, tmp_path: Path, mode: str
) -> None:
    # steer plants push config that never names the recorded URL (tests/agents/
    # repoints_remote.py says what each mode does) while ship's push waits; the human lets it
    # stand and approves the push. Only ship's branch may reach origin, with no option, and
    # nothing may reach the agent's repository.
    trap = tmp_path / "agent"
    origin = two_loops(repo, tmp_path, "fixer.py", "repoints_remote.py", trap, mode)
    stolen = Path(f"{trap}{origin}")
    plain_git(origin, "config", "receive.advertisePushOptions", "true")
    options = tmp_path / "push-options.txt"
    hook = origin / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\necho \"count=$GIT_PUSH_OPTION_COUNT\" >> '{options}'\n")
    hook.chmod(0o755)
    item = ship(repo)
    assert_clean_exit(loopctl(repo, "inbox", "approve", steer(repo)), 0)
    approved = loopctl(repo, "inbox", "approve", item)
    (finished,) = events(repo, "action_finished")
    (commit,) = [e for e in events(repo, "commit_created") if e.loop == "ship"]
    print(
        f"\n{mode}: push ok={finished.data['ok']}: {finished.data['detail']}; origin has"
        f" {sorted(remote_refs(origin))}, options seen {ran(options)}"
    )
    assert "Traceback" not in approved.stdout + approved.stderr
    if mode == "empty-rewrite":
        assert finished.data["ok"] is False
        assert "insteadOf rewrites it" in finished.data["detail"]
        assert remote_refs(stolen) == {}
        assert remote_refs(origin) == {}
    else:
        assert_clean_exit(approved, 0)
        assert finished.data["ok"] is True
        assert remote_refs(origin) == {f"refs/heads/{BRANCH}": commit.data["sha"]}
        assert ran(options) == ["count=0"]
    # Each trap is live: git as a user runs it sends the agent's tag, option or destination.
    plain_git(repo, "push", "-q", str(origin), f"{commit.data['sha']}:refs/heads/by-hand")
    live = {
        "empty-rewrite": lambda: "refs/heads/by-hand" in remote_refs(stolen),
        "follow-tags": lambda: "refs/tags/v9.9.9" in remote_refs(origin),
        "push-option": lambda: ran(options)[-1] == "count=1",
    }
    assert live[mode]()


def test_state_sync_refuses_a_remote_repointed_since_the_last_run(
    repo: Path, tmp_path: Path
) -> None:
    attacker = bare(tmp_path / "attacker.git")
    origin = two_loops(repo, tmp_path, "fixer.py", "repoints_remote.py", attacker, "set-url")
    ship(repo)
    assert_clean_exit(loopctl(repo, "inbox", "approve", steer(repo)), 0)
    refused = [loopctl(repo, "state", action) for action in ("push", "pull")]
    print(f"\nstate push to a repointed origin: {refused[0].stderr.strip()}")
    for done in refused:
        assert_clean_exit(done, 1)
        assert len(done.stderr.strip().splitlines()) == 1
        assert "an agent may have repointed it" in done.stderr
    assert remote_refs(attacker) == {}
    # The human names the URL they mean: that is used as it is.
    assert_clean_exit(loopctl(repo, "state", "push", "--remote", str(origin)), 0)
    assert "refs/heads/loopctl-state" in remote_refs(origin)
    assert remote_refs(attacker) == {}


# --- network git against real endpoints ------------------------------------------------------

CANARY = "canary-anthropic-key-4711"


def script(path: Path, marker: Path, label: str, then: str = "") -> str:
    """A program that records `label` (and its first argument) in `marker`, its environment
    next to it, then runs `then`. (Only credential helpers read their input: an ssh command's
    stdin is git's end of the connection, which stays open.)"""
    drain = "cat > /dev/null\n" if "helper" in label or "inc" in label else ""
    path.write_text(
        f"#!/bin/sh\necho \"{label}:$1\" >> '{marker}'\nenv > '{marker}.{label}.env'\n"
        f"{drain}{then}\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture
def http_remote() -> Iterator[tuple[str, list[str]]]:
    """(URL of a repository on a local server that answers 401, the paths it was asked for)."""
    with unauthorized_remote() as remote:
        yield remote


@pytest.fixture
def planted(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`repo` with programs planted in its own config (directly and through both kinds of
    include) and the user's own ssh command and credential helper in the global config;
    every one of them records itself in the returned marker file."""
    marker = tmp_path / "ran.txt"
    tools = tmp_path / "tools"
    tools.mkdir()
    plant = {
        "core.sshCommand": script(tools / "ssh", marker, "planted-ssh", "exit 1"),
        "core.askPass": script(tools / "askpass", marker, "planted-askpass", "echo x"),
        "core.gitProxy": script(tools / "proxy", marker, "planted-proxy", "exit 1"),
        "credential.helper": script(tools / "helper", marker, "planted-helper"),
        "credential.http://127.0.0.1.helper": script(tools / "urlhelper", marker, "planted-url"),
        "core.alternateRefsCommand": script(tools / "alt", marker, "planted-alternates"),
    }
    for key, value in plant.items():
        plain_git(repo, "config", key, value)
    included = tools / "included.gitconfig"
    included.write_text(
        f"[credential]\n\thelper = {script(tools / 'inc', marker, 'planted-inc')}\n"
    )
    plain_git(repo, "config", "include.path", str(included))
    conditional = tools / "conditional.gitconfig"
    conditional.write_text(f"[core]\n\tsshCommand = {script(tools / 'if', marker, 'planted-if')}\n")
    plain_git(repo, "config", "includeIf.gitdir:/.path", str(conditional))
    user = Path(os.environ["GIT_CONFIG_GLOBAL"])
    user.write_text(
        f"[core]\n\tsshCommand = {script(tools / 'user-ssh', marker, 'user-ssh', 'exit 1')}\n"
        f"[credential]\n\thelper = {script(tools / 'user-helper', marker, 'user-helper', 'echo username=u; echo password=p')}\n"  # noqa: E501
    )
    monkeypatch.setenv("ANTHROPIC_API_KEY", CANARY)
    monkeypatch.setenv("GITHUB_TOKEN", "gh-token-for-the-helper")
    monkeypatch.setenv("SSH_AUTH_SOCK", str(tmp_path / "agent.sock"))
    return marker


def ran(marker: Path) -> list[str]:
    return marker.read_text().split() if marker.exists() else []


def env_of(marker: Path, label: str) -> dict[str, str]:
    lines = Path(f"{marker}.{label}.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


@pytest.mark.parametrize("url", ["ssh://127.0.0.1:1/project.git", "git@127.0.0.1:project.git"])
def test_ssh_runs_the_users_command_never_the_repositorys(
    repo: Path, planted: Path, url: str
) -> None:
    head = plain_git(repo, "rev-parse", "HEAD").strip()
    with pytest.raises(GitError):
        lgit.remote_branch_sha(repo, url, "main")
    with pytest.raises(GitError):
        lgit.push_commit(repo, url, head, "main", expect=None)
    with pytest.raises(GitError):
        lgit.fetch_branch(repo, url, "main", "refs/loopctl/test")
    env = env_of(planted, "user-ssh")
    print(f"\n{url}: programs run {ran(planted)}")
    assert ran(planted)  # git probes the command (`-G`) before it connects
    assert {entry.split(":")[0] for entry in ran(planted)} == {"user-ssh"}
    assert env.get("SSH_AUTH_SOCK")  # the one credential ssh needs
    assert "GITHUB_TOKEN" not in env
    assert CANARY not in "".join(env.values())


def test_git_protocol_runs_no_proxy_program_from_the_repository(repo: Path, planted: Path) -> None:
    with pytest.raises(GitError):
        lgit.remote_branch_sha(repo, "git://127.0.0.1:1/project.git", "main")
    assert ran(planted) == []


def test_http_asks_only_the_users_credential_helper(
    repo: Path, planted: Path, http_remote: tuple[str, list[str]]
) -> None:
    url, seen = http_remote
    with pytest.raises(GitError):
        lgit.remote_branch_sha(repo, url, "main")
    env = env_of(planted, "user-helper")
    print(f"\n{url}: requests {seen}; programs run {ran(planted)}")
    assert seen  # git did reach the server, and was asked for a password
    assert [entry.split(":")[0] for entry in ran(planted)] == ["user-helper", "user-helper"]
    assert env.get("GITHUB_TOKEN") == "gh-token-for-the-helper"  # what `gh` helpers read
    assert "SSH_AUTH_SOCK" not in env
    assert CANARY not in "".join(env.values())


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("http.proxy", "http://127.0.0.1:9/"),
        ("http.sslVerify", "false"),
        ("http.http://127.0.0.1.sslCAInfo", "/tmp/agent-ca.pem"),
        ("url.http://127.0.0.1:9/.insteadOf", "http://127.0.0.1"),
    ],
)
def test_repository_config_that_reroutes_http_is_refused(
    repo: Path, http_remote: tuple[str, list[str]], key: str, value: str
) -> None:
    url, seen = http_remote
    plain_git(repo, "config", key, value)
    with pytest.raises(GitError, match=r"refusing to reach http://127\.0\.0\.1"):
        lgit.remote_branch_sha(repo, url, "main")
    assert seen == []


def test_a_remote_section_named_after_the_url_is_refused(repo: Path, tmp_path: Path) -> None:
    origin, attacker = bare(tmp_path / "origin.git"), bare(tmp_path / "attacker.git")
    plain_git(repo, "config", f"remote.{origin}.url", str(attacker))
    head = plain_git(repo, "rev-parse", "HEAD").strip()
    with pytest.raises(GitError, match="a remote named after that URL"):
        lgit.push_commit(repo, str(origin), head, "main", expect=None)
    assert remote_refs(attacker) == {}
    assert remote_refs(origin) == {}


def test_local_commands_get_no_secret_and_no_credential_helper(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A filter program that did run (were it not neutralised) would see loopctl's environment:
    # make git itself report the environment its children get instead.
    monkeypatch.setenv("ANTHROPIC_API_KEY", CANARY)
    monkeypatch.setenv("SSH_AUTH_SOCK", str(tmp_path / "agent.sock"))
    out = lgit.git(["var", "GIT_EDITOR"], cwd=repo).stdout.strip()
    assert out == ":"
    listed = lgit.git(["config", "--get-all", "credential.helper"], cwd=repo, check=False)
    assert listed.stdout.strip() == ""
    env = git_runner._base_env()
    assert "ANTHROPIC_API_KEY" not in env
    assert "SSH_AUTH_SOCK" not in env
    assert env["GIT_NO_REPLACE_OBJECTS"] == "1"


def test_a_password_in_the_url_stays_out_of_the_log_and_pins_the_rest(
    repo: Path, tmp_path: Path, http_remote: tuple[str, list[str]]
) -> None:
    url, seen = http_remote
    secret_url = url.replace("http://", "http://user:hunter2-token@")
    plain_git(repo, "remote", "add", "origin", secret_url)
    log = EventLog(tmp_path / "events.jsonl")
    pin = remotes.read_pin(repo, "origin")
    log.append(EventType.TICK_STARTED, run="r1", data={remotes.PIN_FIELD: pin.to_json()})
    assert "hunter2" not in (tmp_path / "events.jsonl").read_text()
    assert pin.url == url.replace("http://", "http://***@")
    # Same host and path: the configured URL (with its password) is the one used.
    assert remotes.push_url(repo, log.read(), "r1", "origin") == secret_url
    plain_git(repo, "remote", "set-url", "origin", secret_url.replace("/project", "/other"))
    with pytest.raises(remotes.RemoteMoved, match="nothing was sent"):
        remotes.push_url(repo, log.read(), "r1", "origin")
    assert seen == []
