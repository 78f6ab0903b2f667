"""An npm workspace whose `node_modules` links its packages into the checkout: a Node check in a
task's worktree imports the worktree's packages, not the main checkout's (issue 23, item 1).

The workspace is real and needs no registry: `packages/a` exports a function, `packages/b`
requires `a` and is tested with Node's own runner (`node --test`), and `node_modules/a` is the
link npm makes (`../packages/a`). loopctl and the scripted maker run as real processes.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from support.cli import assert_clean_exit, run_loopctl
from support.journal import events
from support.processes import finishes
from support.repos import (
    commit_all,
    git,
    make_repo,
    tasks_command,
    toml_value,
    write_agent,
    write_config,
)

from loopctl import node_links

NODE = shutil.which("node")


def _node_major() -> int:
    if NODE is None:
        return 0
    out = subprocess.run([NODE, "--version"], capture_output=True, text=True, check=False).stdout
    return int(out.strip().lstrip("v").split(".")[0] or 0)


needs_node = pytest.mark.skipif(_node_major() < 18, reason="needs node >= 18 (node --test)")

BUG = "exports.add = (x, y) => x - y;\n"
FIX = "exports.add = (x, y) => x + y;\n"
TEST_B = """\
const test = require("node:test");
const assert = require("node:assert");
const { sum } = require("..");
test("sum adds", () => { assert.strictEqual(sum([2, 3]), 5); });
"""
CHECK = ["node", "--test", "packages/b/test/"]


def write_json(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An npm workspace with its `node_modules` as `npm install` leaves it (no registry)."""
    repo = make_repo(tmp_path / "mono")
    write_json(
        repo / "package.json", {"name": "mono", "private": True, "workspaces": ["packages/*"]}
    )
    write_json(
        repo / "packages/a/package.json", {"name": "a", "version": "1.0.0", "main": "index.js"}
    )
    (repo / "packages/a/index.js").write_text(BUG)
    write_json(
        repo / "packages/b/package.json",
        {"name": "b", "version": "1.0.0", "main": "index.js", "dependencies": {"a": "1.0.0"}},
    )
    (repo / "packages/b/index.js").write_text(
        'const { add } = require("a");\nexports.sum = (xs) => xs.reduce(add, 0);\n'
    )
    (repo / "packages/b/test").mkdir()
    (repo / "packages/b/test/sum.test.js").write_text(TEST_B)
    (repo / ".gitignore").write_text("node_modules/\n")
    modules = repo / "node_modules"
    modules.mkdir()
    (modules / "a").symlink_to("../packages/a")
    (modules / "b").symlink_to("../packages/b")
    # A third-party package, shared with every worktree.
    write_json(modules / "leftpad/package.json", {"name": "leftpad", "main": "index.js"})
    (modules / "leftpad/index.js").write_text("module.exports = (s) => ' ' + s;\n")
    (modules / ".cache").mkdir()  # a tool's cache: each worktree makes its own
    return repo


def configure(repo: Path, maker: str, *args: str, loop: str | None = None) -> None:
    write_agent(repo, "maker", maker, *args)
    write_config(
        repo,
        'version = 1\n\n[defaults]\nmaker = "maker"\n\n'
        f'[conditions]\n"fixed" = {toml_value(CHECK)}\n',
    )
    if loop is not None:
        path = repo / ".loop" / "loops" / "green.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(loop)
    commit_all(repo, "a workspace with a bug in a")


def linked_notes(repo: Path) -> list[dict[str, object]]:
    return [e.data for e in events(repo, "note") if e.data.get("what") == "node_modules_linked"]


@needs_node
def test_the_check_in_the_checkout_imports_the_checkouts_package(workspace: Path) -> None:
    """The fixture is what it claims: `b` finds `a` through the link, and the test fails."""
    done = subprocess.run(CHECK, cwd=workspace, capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    (workspace / "packages/a/index.js").write_text(FIX)
    done = subprocess.run(CHECK, cwd=workspace, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_node
def test_a_fix_in_a_workspace_package_passes_its_check(workspace: Path) -> None:
    configure(workspace, "replaces_text.py", "packages/a/index.js", "x - y", "x + y")
    before = sorted(os.listdir(workspace / "node_modules"))

    done = run_loopctl(workspace, "goal", "fixed", "--max-iterations", "1", timeout=120)

    assert_clean_exit(done, 0)
    assert "x + y" in git(workspace, "show", "loop/goal/fixed:packages/a/index.js")
    assert (workspace / "packages/a/index.js").read_text() == BUG  # the checkout is untouched
    assert sorted(os.listdir(workspace / "node_modules")) == before
    assert os.readlink(workspace / "node_modules/a") == "../packages/a"
    (note,) = linked_notes(workspace)
    assert note["folders"] == ["node_modules"]
    assert note["workspace_links"] == ["node_modules/a", "node_modules/b"]


def linking_loop(repo: Path) -> str:
    """A loop whose setup links the checkout's `node_modules` into each worktree: what a user
    writes to make `npx jest` work there, and what made the check test the checkout's `a`."""
    setup = ["ln", "-s", str(repo / "node_modules"), "node_modules"]
    return (
        'prompt = "Fix the tests."\ngoal = "fixed"\n\n[budget]\nmax_iterations = 1\n\n'
        f"[worktree]\nsetup = [{toml_value(setup)}]\n"
    )


@needs_node
def test_a_setup_that_links_the_checkouts_node_modules_is_redirected(workspace: Path) -> None:
    configure(
        workspace,
        "replaces_text.py",
        *("packages/a/index.js", "x - y", "x + y"),
        loop=linking_loop(workspace),
    )

    done = run_loopctl(workspace, "run", "green", "--once", timeout=120)

    assert_clean_exit(done, 0)
    assert linked_notes(workspace), "the setup's link was replaced"
    refs = git(workspace, "for-each-ref", "--format=%(refname:short)", "refs/heads/loop/")
    (branch,) = refs.split()
    assert "x + y" in git(workspace, "show", f"{branch}:packages/a/index.js")


@needs_node
def test_a_pooled_worktree_keeps_its_linked_folder_while_nothing_changed(workspace: Path) -> None:
    """Two tasks, one after the other: the second gets the first's worktree from the pool, and
    with it the folder built for it (intact: not built again), and its check passes too."""
    loop = (
        'goal = "fixed"\n\n[tasks]\n'
        + tasks_command("t1", "t2")
        + 'prompt = "Fix a."\n\n[budget]\nmax_iterations = 1\nmax_parallel = 1\n'
    )
    configure(workspace, "replaces_text.py", "packages/a/index.js", "x - y", "x + y", loop=loop)

    done = run_loopctl(workspace, "run", "green", "--once", timeout=120)

    assert_clean_exit(done, 0)
    ready = {
        e.task: e.data for e in events(workspace, "note") if e.data.get("what") == "workspace_ready"
    }
    assert ready["t2"]["pool"] == "hit"
    assert ready["t2"]["discarded"] == []
    assert [
        e.task for e in events(workspace, "note") if e.data.get("what") == "node_modules_linked"
    ] == ["t1"]
    finished = {e.task: e.data["status"] for e in events(workspace, "task_finished")}
    assert finished == {"t1": "done", "t2": "done"}


@needs_node
@pytest.mark.parametrize("how", ["goal", "linking setup"])
def test_a_broken_base_fixed_only_in_the_checkout_does_not_already_hold(
    workspace: Path, how: str
) -> None:
    configure(workspace, "fails.py", loop=linking_loop(workspace) if how != "goal" else None)
    (workspace / "packages/a/index.js").write_text(FIX)  # uncommitted, in the main checkout
    args = (
        ["goal", "fixed", "--max-iterations", "1"] if how == "goal" else ["run", "green", "--once"]
    )

    done = run_loopctl(workspace, *args, timeout=120)

    assert done.returncode == 1, done.stdout + done.stderr
    assert "already holds" not in done.stdout
    holds = [e for e in events(workspace, "note") if e.data.get("what") == "goal_already_holds"]
    assert holds == []
    assert events(workspace, "attempt_started"), "the maker was called: the base fails"


@needs_node
def test_dry_run_says_which_tree_a_node_check_imports(workspace: Path) -> None:
    configure(workspace, "fails.py")

    done = run_loopctl(workspace, "goal", "fixed", "--dry-run")

    assert_clean_exit(done, 0)
    assert "a Node check imports the workspace packages (a, b) from the worktree" in done.stdout


def test_validate_and_doctor_say_which_tree_a_node_check_imports(workspace: Path) -> None:
    (workspace / ".loop").mkdir()
    (workspace / ".loop/.gitignore").write_text("cache/\nlog/\n")  # validate's answer is kept
    configure(workspace, "fails.py")
    said = "a Node check imports the workspace packages (a, b) from the worktree"

    text = run_loopctl(workspace, "validate")
    as_json = run_loopctl(workspace, "validate", "--json")
    doctor = run_loopctl(workspace, "doctor", "--json", timeout=120)

    assert_clean_exit(text, 0)
    assert f"note: {said}" in text.stdout
    assert said in json.loads(as_json.stdout)["validation"]["imports"][0]
    assert said in json.loads(doctor.stdout)["doctor"]["imports"][0], doctor.stderr
    # A remembered answer is not replayed once node_modules changes.
    assert (workspace / ".loop/cache/validate-text.json").is_file()
    shutil.rmtree(workspace / "node_modules")
    again = run_loopctl(workspace, "validate")
    assert "note:" not in again.stdout


# --- the folder itself -------------------------------------------------------------------------


def worktree_of(repo: Path, tmp_path: Path) -> Path:
    commit_all(repo, "base")
    worktree = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", str(worktree))
    return worktree


def test_workspace_links_point_into_the_worktree_and_the_rest_into_the_checkout(
    workspace: Path, tmp_path: Path
) -> None:
    modules = workspace / "node_modules"
    (modules / "@scope").mkdir()
    (modules / "@scope/c").symlink_to("../../packages/b")
    (modules / ".bin").mkdir()
    (workspace / "packages/a/cli.js").write_text("#!/usr/bin/env node\n")
    (modules / ".bin/a-cli").symlink_to("../a/cli.js")
    (modules / ".bin/pad").symlink_to("../leftpad/index.js")
    worktree = worktree_of(workspace, tmp_path)

    (built,) = node_links.link_node_modules(workspace, worktree)

    mine = worktree / "node_modules"
    assert built.relative == "node_modules"
    assert mine.is_dir()
    assert not mine.is_symlink()
    assert os.readlink(mine / "a") == "../packages/a"
    assert (mine / "a").resolve() == (worktree / "packages/a").resolve()
    assert (mine / "@scope/c").resolve() == (worktree / "packages/b").resolve()
    assert (mine / ".bin/a-cli").resolve() == (worktree / "packages/a/cli.js").resolve()
    assert (mine / "leftpad").resolve() == (modules / "leftpad").resolve()
    assert (mine / ".bin/pad").resolve() == (modules / "leftpad/index.js").resolve()
    assert not (mine / ".cache").exists()
    assert git(worktree, "status", "--porcelain") == ""  # ignored: never committed
    # Built once: a second preparation keeps it.
    assert node_links.link_node_modules(workspace, worktree) == ()


def test_a_package_folders_own_node_modules_is_linked_too(workspace: Path, tmp_path: Path) -> None:
    """pnpm links a package's dependencies in that package's own node_modules."""
    nested = workspace / "packages/b/node_modules"
    nested.mkdir()
    (nested / "a").symlink_to("../../a")
    worktree = worktree_of(workspace, tmp_path)

    built = node_links.link_node_modules(workspace, worktree)

    assert [folder.relative for folder in built] == ["node_modules", "packages/b/node_modules"]
    link = worktree / "packages/b/node_modules/a"
    assert os.readlink(link) == "../../a"
    assert link.resolve() == (worktree / "packages/a").resolve()


def test_a_node_modules_the_worktree_has_is_left_alone(workspace: Path, tmp_path: Path) -> None:
    worktree = worktree_of(workspace, tmp_path)
    (worktree / "node_modules").mkdir()  # what `npm ci` in a setup made
    (worktree / "node_modules/marker").write_text("setup's\n")

    assert node_links.link_node_modules(workspace, worktree) == ()
    assert (worktree / "node_modules/marker").read_text() == "setup's\n"


def test_a_stale_linked_folder_is_rebuilt(workspace: Path, tmp_path: Path) -> None:
    worktree = worktree_of(workspace, tmp_path)
    node_links.link_node_modules(workspace, worktree)
    (workspace / "node_modules/c").symlink_to("../packages/b")  # npm install in the checkout

    (built,) = node_links.link_node_modules(workspace, worktree)

    assert "c" in [link.name for link in built.workspace]
    assert (worktree / "node_modules/c").resolve() == (worktree / "packages/b").resolve()


def test_a_fifo_left_as_the_marker_of_a_built_folder_holds_nothing_up(
    workspace: Path, tmp_path: Path
) -> None:
    """The folder built here is the agent's to write (a pooled worktree keeps it): a FIFO in
    its marker's place made loopctl's next read of it block for ever, with no writer to come.
    It is read as no marker (not built here, so not ours to replace) at once."""
    worktree = worktree_of(workspace, tmp_path)
    node_links.link_node_modules(workspace, worktree)
    marker = worktree / "node_modules" / node_links.MARKER
    marker.unlink()
    os.mkfifo(marker)
    (workspace / "node_modules/c").symlink_to("../packages/b")  # stale: a rebuild would start

    raised = finishes(lambda: node_links.link_node_modules(workspace, worktree))

    assert raised is None
    assert stat.S_ISFIFO(marker.lstat().st_mode)  # left as it is, not entered, not replaced
    assert not (worktree / "node_modules/c").exists()


def test_nothing_is_written_through_a_planted_link(workspace: Path, tmp_path: Path) -> None:
    """A package folder that is a link (committed, or left by an agent before a resume) is not
    entered: no node_modules appears wherever it points."""
    (workspace / "packages/b/node_modules").mkdir()
    (workspace / "packages/b/node_modules/x").symlink_to("../../a")
    worktree = worktree_of(workspace, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(worktree / "packages/b")
    (worktree / "packages/b").symlink_to(elsewhere)
    (worktree / "node_modules").symlink_to(elsewhere)  # not the checkout's: not ours to replace

    assert node_links.link_node_modules(workspace, worktree) == ()
    assert list(elsewhere.iterdir()) == []


def test_a_node_modules_git_does_not_ignore_is_not_built(workspace: Path, tmp_path: Path) -> None:
    (workspace / ".gitignore").write_text("")
    git(workspace, "add", "-A", "--", ".", ":!node_modules")
    git(workspace, "commit", "-q", "-m", "node_modules neither ignored nor tracked")
    worktree = tmp_path / "wt"
    git(workspace, "worktree", "add", "-q", str(worktree))

    assert node_links.link_node_modules(workspace, worktree) == ()
    assert not (worktree / "node_modules").exists()
    assert "not ignored by git" in (node_links.describe(workspace, setup=False) or "")


def test_a_partial_folder_a_killed_build_left_is_removed(workspace: Path, tmp_path: Path) -> None:
    worktree = worktree_of(workspace, tmp_path)
    (worktree / "node_modules.loopctl-partial").mkdir()
    (worktree / "node_modules.loopctl-partial/a").symlink_to("../packages/a")

    node_links.link_node_modules(workspace, worktree)

    assert not os.path.lexists(worktree / "node_modules.loopctl-partial")
    assert git(worktree, "status", "--porcelain") == ""
