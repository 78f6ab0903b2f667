"""The diff in the approval: `inbox show` prints the whole patch, `inbox diff` the patch alone."""

from __future__ import annotations

import os
import pty
import subprocess
from pathlib import Path

import pytest
from support.cli import assert_clean_exit, invoke, loopctl_argv, run_loopctl
from support.delivery import inbox_items, ship_loop, the_approval
from support.journal import events
from support.repos import PY, add_remote, git, make_project

from loopctl.cli.pager import coloured_diff


def approval_run(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """A gated push of the odd-files agent's work: (item id, commit sha)."""
    make_project(repo, "writes_odd_files.py")
    add_remote(repo, tmp_path)
    ship_loop(repo, 'actions = ["commit", "push"]')
    result = invoke(monkeypatch, repo, "run", "ship", "--once")
    assert result.exit_code == 0, result.output
    (commit,) = events(repo, "commit_created", "main")
    return the_approval(monkeypatch, repo)["id"], commit.data["sha"]


def test_inbox_diff_applies_to_the_base_in_a_fresh_clone(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    item, sha = approval_run(repo, tmp_path, monkeypatch)
    base = git(repo, "rev-parse", "HEAD").strip()
    done = subprocess.run(
        loopctl_argv("inbox", "diff", item), cwd=repo, capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    patch = done.stdout
    assert b"windows.txt" in patch
    assert b"one\r\n" in patch  # CR LF kept: the bytes, not a text rendering
    assert b"caf\xe9" in patch  # not UTF-8, kept as it is
    assert b"GIT binary patch" in patch

    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    git(clone, "checkout", "-q", "--detach", base)
    subprocess.run(["git", "apply", "--index", "-"], cwd=clone, input=patch, check=True)
    tree = git(clone, "write-tree").strip()
    assert tree == git(repo, "rev-parse", f"{sha}^{{tree}}").strip()


def test_inbox_show_prints_the_whole_patch_and_stat_the_short_form(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    item, _ = approval_run(repo, tmp_path, monkeypatch)
    shown = invoke(monkeypatch, repo, "inbox", "show", item)
    assert shown.exit_code == 0, shown.output
    assert "Patch:" in shown.stdout
    assert "-    return a - b" in shown.stdout
    assert "+    return a + b" in shown.stdout
    assert "ALL CHECKS PASSED" in shown.stdout
    assert "\x1b" not in shown.stdout  # piped: plain, and stripped
    assert "\x07" not in shown.stdout

    short = invoke(monkeypatch, repo, "inbox", "show", item, "--stat")
    assert short.exit_code == 0, short.output
    assert "calc.py" in short.stdout
    assert "Patch:" not in short.stdout
    assert "+    return a + b" not in short.stdout

    (listed,) = [i for i in inbox_items(monkeypatch, repo) if i["id"] == item]
    as_json = invoke(monkeypatch, repo, "inbox", "show", item, "--json")
    assert "+    return a + b" in as_json.stdout
    assert listed["kind"] == "approval"


def test_the_coloured_view_keeps_only_its_own_colours() -> None:
    patch = "+all good\x1b]0;pwned\x07\x1b[2J\x1b[32mALL CHECKS PASSED\x1b[0m\n-old\n"
    shown = coloured_diff(patch)
    assert "\x1b[" in shown  # rich's colours
    for injected in ("\x1b]0;", "\x07", "\x1b[2J", "\x1b[32m"):
        assert injected not in shown
    assert "ALL CHECKS PASSED" in shown


def test_on_a_terminal_show_and_diff_go_through_the_pager_coloured_and_stripped(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    item, _ = approval_run(repo, tmp_path, monkeypatch)
    paged = tmp_path / "paged.bin"
    pager = f"{PY} -c \"import sys; open({str(paged)!r}, 'ab').write(sys.stdin.buffer.read())\""
    env = {**os.environ, "PAGER": pager}
    env.pop("NO_COLOR", None)
    for command in (["inbox", "show", item], ["inbox", "diff", item]):
        paged.unlink(missing_ok=True)
        terminal = tty_run(repo, loopctl_argv(*command), env)
        assert terminal == 0
        text = paged.read_bytes()
        assert b"+    return a + b" in text
        assert b"\x1b[" in text  # coloured
        for injected in (b"\x1b]0;", b"\x07", b"\x1b[2J", b"\x1b[32m"):
            assert injected not in text, command
    # NO_COLOR: still paged, not coloured.
    paged.unlink()
    assert tty_run(repo, loopctl_argv("inbox", "diff", item), {**env, "NO_COLOR": "1"}) == 0
    assert b"\x1b" not in paged.read_bytes()


def tty_run(cwd: Path, argv: list[str], env: dict[str, str]) -> int:
    """Run `argv` with a pseudo-terminal as stdout; its exit code."""
    leader, follower = pty.openpty()
    try:
        done = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower
        )
        os.close(follower)
        while True:
            try:
                if not os.read(leader, 65536):
                    break
            except OSError:
                break
        return done.wait(timeout=60)
    finally:
        os.close(leader)


def test_inbox_diff_of_a_non_approval_exits_1_with_one_line(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fails.py")
    result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")
    assert result.exit_code == 1
    (failed,) = [i for i in inbox_items(monkeypatch, repo) if i["kind"] == "failed"]
    done = run_loopctl(repo, "inbox", "diff", failed["id"])
    assert_clean_exit(done, 1)
    assert done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1
    assert "not an approval" in done.stderr
