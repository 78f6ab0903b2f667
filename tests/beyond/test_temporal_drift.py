"""Declared scope under Temporal (issue 31, item 1): a tick a worker runs holds out-of-scope
work as a local run does.

The "CSS fix" of tests/engine/test_drift_gate.py, its maker also editing db/schema.sql, runs as
the `loopctl.LoopTick` workflow on a real `loopctl worker` against a real Temporal development
server: the tick ends paused with the path named, nothing committed; approving the item at the
project commits exactly the checked work.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from support.beyond import loopctl_worker, tick
from support.cli import run_loopctl
from support.journal import events
from support.repos import PY, git, toml_value, write_agent, write_config, write_loop

CHECK = [
    PY,
    "-B",
    "-c",
    "import pathlib, sys; sys.exit('red' in pathlib.Path('styles/site.css').read_text())",
]


def css_project(where: Path) -> Path:
    """The site with a red link and a schema, the loop "nightly" scoped to styles/."""
    project = where / "project"
    (project / "styles").mkdir(parents=True)
    (project / "styles" / "site.css").write_text("a { color: red; }\n")
    (project / "db").mkdir()
    (project / "db" / "schema.sql").write_text("CREATE TABLE users (id INTEGER PRIMARY KEY);\n")
    git(project, "init", "-q", "-b", "main")
    write_agent(project, "maker", "css_fix.py", "schema")
    write_config(project, 'version = 1\n\n[defaults]\nmaker = "maker"\n')
    write_loop(
        project,
        "nightly",
        'every = "1h"\nprompt = "Fix the link colour in styles/site.css"\n'
        '\n[scope]\npaths = ["styles/**"]\n'
        f"\n[checker]\ncommand = {toml_value(CHECK)}\n"
        "\n[budget]\nmax_iterations = 1\n",
    )
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "a site, its schema, a scoped loop")
    return project


def test_a_worker_holds_out_of_scope_work_for_approval(temporal_server: str, outside: Path) -> None:
    project = css_project(outside)
    log = outside / "worker.log"

    with loopctl_worker(temporal_server, project, "machine-a", log):
        result = asyncio.run(tick(temporal_server, "css-1"))

    assert result.outcome == "needs-approval", (result, log.read_text())
    (finished,) = [e for e in events(project, "task_finished") if e.loop == "nightly"]
    assert finished.data["status"] == "paused"
    assert "path db/schema.sql" in finished.data["reason"]
    assert events(project, "commit_created") == []
    (item,) = [
        e.data["id"] for e in events(project, "inbox_opened") if e.data["evidence"].get("drift")
    ]

    approved = run_loopctl(project, "inbox", "approve", item)

    assert approved.returncode == 0, approved.stderr
    (commit,) = events(project, "commit_created")
    changed = git(project, "diff", "--name-only", f"main...{commit.data['branch']}").split()
    assert changed == ["db/schema.sql", "styles/site.css"]
