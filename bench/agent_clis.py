"""One attempt with each real agent CLI: through `loopctl goal` against the bare CLI.

Run: python bench/agent_clis.py [--runs 3]

Both sides use the same installed CLI (scripts/install-agent-clis), the same scripted model
server (tests/support/model_server.py, sealed in a loopback-only network namespace as root) and
the same fix. Bare: the CLI's own headless command in a fresh clone. loopctl: `loopctl goal "tests
green"` with the CLI as maker, which adds a worktree, the prompt, the check, the commit and the
event log. Prints medians; the ratio is loopctl's whole goal against the bare CLI call.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(ROOT / "tests"))  # `support`, the real-CLI harness the tests use
from results import Row, print_rows  # noqa: E402
from scratch_home import isolate  # noqa: E402

CALC = "def add(a, b):\n    return a - b\n"


def bare_argv(name: str, home: Path) -> list[str]:
    """The headless command a user would type (../shared/reference/real-clis.md)."""
    if name == "claude":
        return ["claude", "-p", "Fix add", "--output-format", "json", "--permission-mode",
                "acceptEdits"]  # fmt: skip
    if name == "codex":
        return ["codex", "exec", "--json", "--sandbox", "workspace-write", "-m", "gpt-5.5",
                "-c", "model_provider=fake", "-c",
                'model_providers.fake={name="Fake",base_url="BASE/v1",env_key="OPENAI_API_KEY",'
                'wire_api="responses"}', "Fix add"]  # fmt: skip
    if name == "opencode":
        return ["opencode", "run", "--format", "json", "-m", "fake/fake-model", "Fix add"]
    return ["aider", "--model", "openai/fake-model", "--model-metadata-file",
            str(home / "aider-models.json"), "--edit-format", "diff", "--yes-always",
            "--no-auto-commits", "--no-gitignore", "--no-check-update", "--analytics-disable",
            "--no-show-model-warnings", "--no-pretty", "--no-stream", "--map-tokens", "0",
            "--message", "Fix add", "calc.py"]  # fmt: skip


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def one_run(name: str, through_loopctl: bool) -> float:
    from support import real_clis

    scratch = Path(tempfile.mkdtemp(prefix="bench-cli-"))
    try:
        home = scratch / "home"
        home.mkdir()
        isolate(home)
        repo = scratch / "repo"
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
        (repo / "calc.py").write_text(CALC)
        box = real_clis.make_sandbox()
        env = real_clis.cli_environment(name, box)
        if through_loopctl:
            real_clis.use_real_maker(repo, name, box)
            args: tuple[str, ...] = ("goal", "tests green")
        else:
            argv = [a.replace("BASE", box.url) for a in bare_argv(name, home)]
            # opencode takes its project folder from $PWD, not from its working directory.
            env.pop("PWD", None)
            env.update(
                ANTHROPIC_BASE_URL=box.url,
                OPENAI_API_BASE=f"{box.url}/v1",
                CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            )
            args = ()
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "calc")
        started = time.perf_counter()
        if through_loopctl:
            run = real_clis.run_sealed(repo, box, env, *args)
        else:
            run = real_clis.run_sealed(repo, box, env, *args, command=argv)
        took = time.perf_counter() - started
        if run.done.returncode != 0 or "a + b" not in _fixed(repo, through_loopctl):
            shown = run.done.stdout[-2000:] + run.done.stderr[-2000:]
            raise RuntimeError(f"{name} did not fix calc.py ({run.done.returncode}):\n{shown}")
        return took
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _fixed(repo: Path, through_loopctl: bool) -> str:
    if not through_loopctl:
        return (repo / "calc.py").read_text()
    done = subprocess.run(
        ["git", "show", "loop/goal/tests-green:calc.py"], cwd=repo, capture_output=True, text=True
    )
    return done.stdout


def measure(runs: int = 3) -> list[Row]:
    from support import real_clis

    rows = []
    for name in real_clis.CLIS:
        if not (real_clis.CLIS_BIN / name).exists():
            print(f"{name}: not installed (scripts/install-agent-clis)")
            continue
        bare = statistics.median(one_run(name, False) for _ in range(runs))
        goal = statistics.median(one_run(name, True) for _ in range(runs))
        rows.append(
            Row(
                f"real {name} {real_clis.VERSIONS[name]}: goal vs bare CLI",
                goal,
                "s",
                baseline=bare,
                note="one fixing attempt, sealed model server; includes the CLI's start-up",
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    print_rows(measure(parser.parse_args().runs))


if __name__ == "__main__":
    main()
