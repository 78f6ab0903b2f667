"""`loopctl init`: scaffold a repository, never overwrite, detect the agent CLIs on PATH."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.outside_tmp import outside_tmp
from support.repos import git, make_repo
from typer.testing import CliRunner, Result

from loopctl.cli.app import app
from loopctl.paths import TEMPLATES

SKILL_FILES = [
    ".agents/skills/fix-ci/SKILL.md",
    ".agents/skills/triage-issue/SKILL.md",
    ".agents/skills/review-diff/SKILL.md",
]
# What init writes on a machine with no agent CLI: a placeholder `command` maker.
PLACEHOLDER_FILES = [
    ".loop/config.toml",
    ".loop/loops/example.toml",
    ".loop/.gitignore",
    ".loop/agents/command-maker.toml",
    *SKILL_FILES,
]
CLAUDE_FILES = [
    ".loop/config.toml",
    ".loop/loops/example.toml",
    ".loop/.gitignore",
    ".loop/agents/claude-maker.toml",
    ".loop/agents/claude-checker.toml",
    *SKILL_FILES,
]
# Everything loopctl writes in a repository while it runs (integrity.RUNTIME): all ignored.
RUNTIME = {
    ".loop/INBOX.md",
    ".loop/STATE.md",
    ".loop/cache/",
    ".loop/locks/",
    ".loop/log/",
    ".loop/runs/",
}
LOOPCTL = Path(sys.executable).with_name("loopctl")
GIT = shutil.which("git") or "git"  # found before a test makes PATH its own folder alone


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty folder that is the whole PATH, so no real agent CLI is detected."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))
    return folder


def fake_cli(folder: Path, name: str, *, executable: bool = True) -> None:
    script = folder / name
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755 if executable else 0o644)


def invoke(cwd: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(app, list(args))
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def files_under(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and ".git" not in path.relative_to(root).parts
    }


def created_files(result: Result) -> list[str]:
    return [line.split()[1] for line in result.stdout.splitlines() if line.startswith("created")]


def next_line(result: Result) -> str:
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("next: ")]
    return line.removeprefix("next: ")


@pytest.fixture
def outside(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A repository outside /tmp, where users keep theirs (and the sandbox protects nothing by
    its private /tmp)."""
    with outside_tmp("init") as base:
        yield make_repo(base / "repo")


def commit_all(repo: Path, message: str) -> None:
    git(repo, "add", "-A", program=GIT)
    git(repo, "commit", "-q", "-m", message, program=GIT)


def shell(repo: Path, bin_dir: Path, command: str) -> subprocess.CompletedProcess[str]:
    """`command` run as a user runs it: a shell in the repository, PATH = `bin_dir`, loopctl's
    own folder, and the system's (git, sh)."""
    path = os.pathsep.join([str(bin_dir), str(LOOPCTL.parent), "/usr/bin", "/bin"])
    return subprocess.run(
        ["/bin/sh", "-c", command],
        cwd=repo,
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_init_in_a_fresh_repository(
    repo: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = invoke(repo, monkeypatch, "init")
    assert result.exit_code == 0, result.output
    assert created_files(result) == PLACEHOLDER_FILES
    assert "skipped" not in result.stdout
    # The CLIs it looked for are the registry's, and the placeholder says what to do.
    assert (
        "no agent CLI found on PATH (claude, codex, opencode, aider, goose): command-maker is a"
        " placeholder `command` agent; set its argv to your own agent program" in result.stdout
    )
    # One line says why definitions live where they do.
    assert "agents go in .loop/agents/ (loopctl's own format, read by no CLI)" in result.stdout
    assert next_line(result) == "loopctl validate && loopctl agents test command-maker"
    # Nothing at the repository's top level but loopctl's folder and the shared skills folder.
    assert sorted(files_under(repo)) == sorted([*PLACEHOLDER_FILES, "README.md"])
    assert sorted(p.name for p in repo.iterdir()) == [".agents", ".git", ".loop", "README.md"]

    config = tomllib.loads((repo / ".loop" / "config.toml").read_text())
    # No agent CLI to judge prose goals with: no default checker (a built-in goal needs none).
    assert config["defaults"] == {"maker": "command-maker"}
    assert '# checker = "claude-checker"' in (repo / ".loop" / "config.toml").read_text()
    assert (repo / ".loop" / ".gitignore").read_text() == (TEMPLATES / "gitignore").read_text()
    placeholder = (repo / ".loop" / "agents" / "command-maker.toml").read_text()
    assert placeholder == (TEMPLATES / "command-placeholder.toml").read_text()
    for relative in SKILL_FILES:
        shipped = TEMPLATES / "skills" / Path(relative).relative_to(".agents/skills")
        assert (repo / relative).read_bytes() == shipped.read_bytes(), relative

    checked = invoke(repo, monkeypatch, "validate")
    assert checked.exit_code == 0, checked.output
    assert checked.stdout == "ok: 1 loops, 1 agents, 3 skills\n"


def test_init_from_a_subdirectory_writes_at_the_root(
    repo: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nested = repo / "src" / "pkg"
    nested.mkdir(parents=True)
    result = invoke(nested, monkeypatch, "init")
    assert result.exit_code == 0, result.output
    assert (repo / ".loop" / "config.toml").is_file()
    assert not (nested / ".loop").exists()


def test_init_never_overwrites(repo: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cli(bin_dir, "claude")
    mine = {
        ".loop/config.toml": b'# my own config\nversion = 1\n[defaults]\nmaker = "claude-maker"\n',
        ".loop/agents/claude-maker.toml": b'description = "mine"\nbackend = "claude"\n',
        ".agents/skills/fix-ci/SKILL.md": b"---\nname: fix-ci\ndescription: Mine.\n---\nMine.\n",
        ".loop/loops/example.toml": b'prompt = "my loop"\n',
    }
    for relative, content in mine.items():
        (repo / relative).parent.mkdir(parents=True, exist_ok=True)
        (repo / relative).write_bytes(content)

    result = invoke(repo, monkeypatch, "init")
    assert result.exit_code == 0, result.output
    for relative, content in mine.items():
        assert (repo / relative).read_bytes() == content, relative
        assert f"skipped  {relative} (already exists)" in result.stdout
    assert created_files(result) == [f for f in CLAUDE_FILES if f not in mine]
    # A kept config keeps its own default maker: init does not claim one.
    assert (
        "agent CLIs found: claude; .loop/config.toml was kept: its [defaults] maker is unchanged"
        in result.stdout
    )
    assert next_line(result) == "loopctl validate && loopctl agents test claude-maker"

    # A second run changes nothing at all and reports every file as skipped.
    before = files_under(repo)
    again = invoke(repo, monkeypatch, "init")
    assert again.exit_code == 0, again.output
    assert files_under(repo) == before
    assert "created" not in again.stdout
    assert "updated" not in again.stdout
    skipped = [line.split()[1] for line in again.stdout.splitlines() if line.startswith("skipped")]
    assert skipped == CLAUDE_FILES


def test_init_keeps_an_older_layout_and_completes_its_ignore_rules(
    repo: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repository set up by an older init: agents/ and skills/ at the top, and ignore rules
    without STATE.md and INBOX.md (so `git add -A` committed them)."""
    fake_cli(bin_dir, "claude")
    old = {
        "agents/claude-maker.toml": (TEMPLATES / "agents" / "claude-maker.toml").read_bytes(),
        "skills/fix-ci/SKILL.md": (TEMPLATES / "skills" / "fix-ci" / "SKILL.md").read_bytes(),
        ".loop/.gitignore": b"# mine\n*.bak\nlog/\nlocks/\nruns/\ncache/",  # no final newline
    }
    for relative, content in old.items():
        (repo / relative).parent.mkdir(parents=True, exist_ok=True)
        (repo / relative).write_bytes(content)

    result = invoke(repo, monkeypatch, "init")
    assert result.exit_code == 0, result.output
    # The same agent or skill in a second folder would clash: it is not written again.
    assert (
        "skipped  .loop/agents/claude-maker.toml (already defined in agents/claude-maker.toml)"
        in result.stdout
    )
    assert (
        "skipped  .agents/skills/fix-ci/SKILL.md (already defined in skills/fix-ci/SKILL.md)"
        in result.stdout
    )
    assert not (repo / ".loop" / "agents" / "claude-maker.toml").exists()
    assert (repo / ".loop" / "agents" / "claude-checker.toml").is_file()
    assert "updated  .loop/.gitignore (added STATE.md, INBOX.md, .loopctl-*.tmp)" in result.stdout
    assert (repo / ".loop" / ".gitignore").read_text() == (
        "# mine\n*.bak\nlog/\nlocks/\nruns/\ncache/\n"
        "# added by loopctl init: files loopctl rewrites on every run\n"
        "STATE.md\nINBOX.md\n.loopctl-*.tmp\n"
    )
    for relative, content in old.items():
        if relative != ".loop/.gitignore":
            assert (repo / relative).read_bytes() == content

    checked = invoke(repo, monkeypatch, "validate")
    assert checked.exit_code == 0, checked.output
    assert checked.stdout == "ok: 1 loops, 2 agents, 3 skills\n"  # no clash, no shadowed skill

    before = files_under(repo)
    again = invoke(repo, monkeypatch, "init")
    assert files_under(repo) == before
    assert "created" not in again.stdout
    assert "updated" not in again.stdout
    assert "nothing written" in again.stdout


def test_init_leaves_a_symlink_alone(
    repo: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.toml"
    (repo / ".loop" / "agents").mkdir(parents=True)
    (repo / ".loop" / "agents" / "command-maker.toml").symlink_to(outside)  # dangling
    (repo / ".loop" / ".gitignore").symlink_to(tmp_path / "ignore")  # never followed to merge
    result = invoke(repo, monkeypatch, "init")
    assert result.exit_code == 0, result.output
    assert "skipped  .loop/agents/command-maker.toml (already exists)" in result.stdout
    assert "skipped  .loop/.gitignore (already exists)" in result.stdout
    assert not outside.exists()
    assert not (tmp_path / "ignore").exists()


def test_init_outside_a_repository(
    tmp_path: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    # Guard: if some parent were a repository, init would (rightly) write there.
    assert not any((folder / ".git").exists() for folder in (plain, *plain.parents))
    result = invoke(plain, monkeypatch, "init")
    assert result.exit_code == 1
    assert result.stderr.startswith("loopctl: not a git repository")
    assert "git init" in result.stderr
    assert result.stdout == ""
    assert list(plain.iterdir()) == []


def test_init_detects_agent_clis_on_path(
    repo: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_cli(bin_dir, "codex")
    fake_cli(bin_dir, "aider")
    fake_cli(bin_dir, "goose", executable=False)  # not executable: not installed
    result = invoke(repo, monkeypatch, "init")
    assert result.exit_code == 0, result.output
    assert "agent CLIs found: codex, aider; default maker: codex-maker" in result.stdout
    assert next_line(result) == "loopctl validate && loopctl run example --dry-run"

    agents = sorted(p.name for p in (repo / ".loop" / "agents").iterdir())
    assert agents == [
        "aider-checker.toml",
        "aider-maker.toml",
        "codex-checker.toml",
        "codex-maker.toml",
    ]
    assert not (repo / "agents").exists()
    # Shell completion offers them from their new folder too.
    from loopctl.cli.completion import agent_names

    assert sorted(agent_names("")) == [Path(name).stem for name in agents]
    config = tomllib.loads((repo / ".loop" / "config.toml").read_text())
    assert config["defaults"] == {"maker": "codex-maker", "checker": "codex-checker"}
    assert "$" not in (repo / ".loop" / "config.toml").read_text()

    checked = invoke(repo, monkeypatch, "validate")
    assert checked.exit_code == 0, checked.output
    assert checked.stdout == "ok: 1 loops, 4 agents, 3 skills\n"


def test_init_without_a_cli_writes_no_cli_agent(
    repo: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_cli(bin_dir, "codex", executable=False)
    result = invoke(repo, monkeypatch, "init")
    assert result.exit_code == 0, result.output
    agents = sorted(p.name for p in (repo / ".loop" / "agents").iterdir())
    assert agents == ["command-maker.toml"]
    config = tomllib.loads((repo / ".loop" / "config.toml").read_text())
    assert config["defaults"] == {"maker": "command-maker"}


# --- on a real machine: the printed next step, a real run, a clean tree ----------------------


@pytest.mark.parametrize("machine", ["no-cli", "claude", "claude-installed-later"])
def test_the_next_line_works(
    outside: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch, machine: str
) -> None:
    """The exact command init prints, run in a shell: on a machine with no agent CLI, on one
    with Claude Code (a stand-in on PATH that answers `--version`), and on one that installed
    it after a first init (the second init adds its agents and keeps the config)."""
    if machine == "claude-installed-later":
        assert invoke(outside, monkeypatch, "init").exit_code == 0
    if machine != "no-cli":
        fake_cli(bin_dir, "claude")
    result = invoke(outside, monkeypatch, "init")
    assert result.exit_code == 0, result.output
    command = next_line(result)
    ran = shell(outside, bin_dir, command)
    assert ran.returncode == 0, (command, ran.stdout, ran.stderr)
    assert ran.stdout.startswith("ok: 1 loops, ")
    assert "warning" not in ran.stdout + ran.stderr
    if machine == "claude":
        assert "Dry run of example" in ran.stdout
    else:
        maker = "command-maker" if machine == "no-cli" else "claude-maker"
        assert f"\n{maker} (" in ran.stdout
        assert ran.stdout.rstrip().endswith("ready")


def test_a_run_after_init_leaves_the_tree_clean(
    outside: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """init, `git add -A` and commit as a newcomer does, then real runs: the placeholder's
    says what to edit; a working agent's succeeds; neither leaves anything for `git status`."""
    result = invoke(outside, monkeypatch, "init")
    assert result.exit_code == 0, result.output
    commit_all(outside, "loopctl init")
    goal = 'loopctl goal "hello exists" --check "test -f hello.txt"'

    placeholder = shell(outside, bin_dir, goal)
    assert placeholder.returncode == 1, placeholder.stdout + placeholder.stderr
    assert (
        "command-maker is a placeholder: set argv in .loop/agents/command-maker.toml"
        in placeholder.stderr
    )
    assert git(outside, "status", "--porcelain", program=GIT) == ""

    # The user puts a program in argv, as the placeholder says, and commits it.
    agent = outside / ".loop" / "agents" / "command-maker.toml"
    agent.write_text('backend = "command"\nargv = ["sh", "-c", "echo hello > hello.txt"]\n')
    commit_all(outside, "my agent")
    done = shell(outside, bin_dir, f"{goal} && loopctl status && loopctl inbox")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "next: git merge loop/goal/hello-exists" in done.stdout

    assert git(outside, "status", "--porcelain", program=GIT) == ""
    ignored = git(outside, "status", "--porcelain", "--ignored", program=GIT).splitlines()
    written = {line.removeprefix("!! ") for line in ignored}
    assert written <= RUNTIME, ignored
    assert {".loop/STATE.md", ".loop/INBOX.md", ".loop/log/", ".loop/runs/"} <= written
    # The user's own change is all there is.
    (outside / "notes.txt").write_text("mine\n")
    assert git(outside, "status", "--porcelain", program=GIT) == "?? notes.txt\n"
