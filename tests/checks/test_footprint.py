"""Issue 31 item 1, the pure parts: what a footprint holds, which steps of it a scope does not
cover, the drift score as docs/loops.md defines it, and the steps read from each CLI's stream."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopctl.backends import stream_steps
from loopctl.checks.drift import drift, features
from loopctl.checks.footprint import Excursion, Footprint, outside, split_commands
from loopctl.definitions.scope import ScopeSpec, host_matches, narrowed, rule_lines
from loopctl.engine.footprint import links_in

CSS = ScopeSpec(paths=("styles/**",))


@pytest.mark.parametrize(
    ("footprint", "scope", "found"),
    [
        (Footprint(files=("styles/a.css",)), CSS, []),
        (Footprint(files=("styles/a.css", "db/schema.sql")), CSS, [("path", "db/schema.sql")]),
        # Written according to the stream, gone from the diff: still outside.
        (Footprint(written=("db/tmp.sql",)), CSS, [("path", "db/tmp.sql")]),
        # A link in scope that points out of it.
        (
            Footprint(files=("styles/x.css",), links=(("styles/x.css", "db/schema.sql"),)),
            CSS,
            [("link", "styles/x.css -> db/schema.sql")],
        ),
        (
            Footprint(commands=("npm test && psql -c 'x; y'",)),
            ScopeSpec(commands=("npm *",)),
            [("command", "psql -c 'x; y'")],
        ),
        (Footprint(tools=("Read", "WebFetch")), ScopeSpec(tools=("Read",)), [("tool", "WebFetch")]),
        (Footprint(tools=("mcp__docs__lookup",)), ScopeSpec(tools=("mcp__docs__*",)), []),
        (
            Footprint(hosts=("registry.npmjs.org:443", "evil.example:443")),
            ScopeSpec(hosts=("registry.npmjs.org",)),
            [("host", "evil.example:443")],
        ),
        (
            Footprint(files=("a", "b", "c"), added=300, removed=5),
            ScopeSpec(max_files=2, max_lines=300),
            [
                ("size", "3 files changed (max_files = 2)"),
                ("size", "305 lines changed (max_lines = 300)"),
            ],
        ),
        # Nothing declared: nothing is outside.
        (Footprint(files=("db/schema.sql",), commands=("rm -rf /",)), ScopeSpec(), []),
    ],
)
def test_outside_names_each_step_the_scope_does_not_cover(
    footprint: Footprint, scope: ScopeSpec, found: list[tuple[str, str]]
) -> None:
    assert [(e.kind, e.what) for e in outside(footprint, scope)] == found


def test_a_task_narrows_the_loops_paths_and_never_widens_them() -> None:
    task = narrowed(CSS, ["styles/buttons/**"])
    footprint = Footprint(files=("styles/buttons/b.css", "styles/site.css", "docs/x.md"))

    assert [e.what for e in outside(footprint, task)] == ["styles/site.css", "docs/x.md"]
    assert [e.what for e in outside(footprint, narrowed(ScopeSpec(), ["docs/**"]))] == [
        "styles/buttons/b.css",
        "styles/site.css",
    ]


def test_the_agents_own_model_is_always_in_scope() -> None:
    footprint = Footprint(hosts=("api.anthropic.com:443",))
    scope = ScopeSpec(hosts=("example.com",))
    assert outside(footprint, scope, model_hosts=["api.anthropic.com:443"]) == ()


@pytest.mark.parametrize(
    ("host", "patterns", "matches"),
    [
        ("example.com:443", ["example.com"], True),
        ("example.com:443", ["example.com:80"], False),
        ("api.example.com:443", ["*.example.com"], True),
        ("example.com:443", ["*.example.com"], False),
        ("badexample.com:443", ["*.example.com"], False),
    ],
)
def test_host_patterns(host: str, patterns: list[str], matches: bool) -> None:
    assert host_matches(host, patterns) is matches


@pytest.mark.parametrize(
    ("line", "parts"),
    [
        ("a && b || c; d | e\nf", ["a", "b", "c", "d", "e", "f"]),
        ("printf '%s\\n' 'x;y' >> f", ["printf '%s\\n' 'x;y' >> f"]),
        ('echo "a && b"', ['echo "a && b"']),
        ("  ", []),
    ],
)
def test_a_command_line_splits_where_the_shell_would(line: str, parts: list[str]) -> None:
    assert split_commands(line) == parts


# --- the drift score ---------------------------------------------------------------------------


def usual(n: int) -> Footprint:
    return Footprint(
        files=(f"styles/s{n}.css",), commands=("ls styles",), tools=("Edit",), added=10
    )


def test_in_scope_and_as_usual_scores_zero() -> None:
    assert drift(usual(9), (), [usual(n) for n in range(5)]).score == 0.0


def test_out_of_scope_weighs_most_and_raises_the_alarm() -> None:
    footprint = Footprint(files=("styles/a.css", "db/schema.sql"), added=2)
    scored = drift(footprint, (Excursion("path", "db/schema.sql"),), [])

    assert (scored.outside, scored.novelty, scored.size) == (0.5, 0.0, 0.0)
    assert scored.score == 0.3
    assert scored.alarm


def test_novelty_counts_what_none_of_the_recent_attempts_had() -> None:
    new = Footprint(
        files=("styles/a.css", "db/x.sql"), commands=("psql -c x",), tools=("Edit",), added=10
    )
    scored = drift(new, (), [usual(n) for n in range(3)])

    # features: dir styles, dir db, program psql, tool Edit; new: dir db, program psql.
    assert features(new) == {"dir styles", "dir db", "program psql", "tool Edit"}
    assert scored.new == ("dir db", "program psql")
    assert scored.novelty == 0.5
    assert scored.score == 0.15
    assert not scored.alarm


def test_novelty_and_size_wait_for_three_earlier_attempts() -> None:
    odd = Footprint(files=("db/x.sql",), added=1000)
    assert drift(odd, (), [usual(1), usual(2)]).score == 0.0


@pytest.mark.parametrize(("lines", "size"), [(20, 0.0), (60, 0.5), (100, 1.0), (400, 1.0)])
def test_size_against_the_median_of_recent_attempts(lines: int, size: float) -> None:
    bigger = Footprint(
        files=("styles/s1.css",), commands=("ls styles",), tools=("Edit",), added=lines
    )
    assert drift(bigger, (), [usual(n) for n in range(4)]).size == size


def test_the_score_reads_back_from_its_record() -> None:
    scored = drift(usual(1), (Excursion("tool", "WebFetch"),), [usual(n) for n in range(3)])
    again = type(scored).from_json(json.loads(json.dumps(scored.to_json())))
    assert again == scored
    assert Footprint.from_json(json.loads(json.dumps(usual(3).to_json()))) == usual(3)


# --- the stream and the diff -------------------------------------------------------------------


def test_claude_stream_json_gives_tools_commands_and_written_files(tmp_path: Path) -> None:
    def use(name: str, given: dict[str, str]) -> str:
        block = {"type": "tool_use", "id": "t", "name": name, "input": given}
        return json.dumps({"type": "assistant", "message": {"content": [block]}})

    text = "\n".join(
        [
            json.dumps({"type": "system", "subtype": "init"}),
            use("Read", {"file_path": str(tmp_path / "styles/a.css")}),
            use("Write", {"file_path": str(tmp_path / "db/x.sql"), "content": "x"}),
            use("Bash", {"command": "rm db/x.sql"}),
            use("Edit", {"file_path": "/etc/passwd"}),
            json.dumps({"type": "result", "subtype": "success"}),
        ]
    )
    steps = stream_steps.read("claude", text, tmp_path)

    assert steps is not None
    assert steps.tools == ["Read", "Write", "Bash", "Edit"]
    assert steps.commands == ["rm db/x.sql"]
    assert steps.written == ["db/x.sql", "/etc/passwd"]
    # The plain JSON result is not a stream: nothing can be read from it.
    assert stream_steps.read("claude", json.dumps({"type": "result"}), tmp_path) is None


def test_codex_json_gives_its_commands_unwrapped_and_its_file_changes(tmp_path: Path) -> None:
    events = [
        {"type": "thread.started", "thread_id": "x"},
        {
            "type": "item.completed",
            "item": {"type": "command_execution", "command": "bash -lc 'ls styles && psql'"},
        },
        {
            "type": "item.completed",
            "item": {"type": "file_change", "changes": [{"path": str(tmp_path / "db/y.sql")}]},
        },
    ]
    steps = stream_steps.read("codex", "\n".join(json.dumps(e) for e in events), tmp_path)

    assert steps is not None
    assert steps.tools == ["shell", "apply_patch"]
    assert steps.commands == ["ls styles && psql"]
    assert steps.written == ["db/y.sql"]
    assert stream_steps.read("command", "anything", tmp_path) is None


def test_opencode_json_gives_its_tools_commands_and_written_files(tmp_path: Path) -> None:
    """opencode's `run --format json` events (the shape the real CLI prints): a tool's input is
    under `part.state.input`; `patch` names its files in the patch text."""

    def tool(name: str, given: dict[str, str]) -> dict[str, object]:
        state = {"status": "completed", "input": given, "output": "ok"}
        return {"type": "tool_use", "sessionID": "ses_1", "part": {"tool": name, "state": state}}

    patch = "*** Begin Patch\n*** Add File: db/new.sql\n+x\n*** Update File: a.py\n*** End Patch"
    events = [
        {"type": "step_start", "part": {}},
        tool("read", {"filePath": str(tmp_path / "styles/site.css")}),
        tool("edit", {"filePath": str(tmp_path / "styles/site.css"), "oldString": "r"}),
        tool("bash", {"command": " rm db/scratch.sql ", "description": "clean"}),
        tool("write", {"filePath": "db/scratch.sql", "content": "x"}),
        tool("patch", {"patchText": patch}),
        {"type": "step_finish", "part": {"tokens": {}}},
    ]
    steps = stream_steps.read("opencode", "\n".join(json.dumps(e) for e in events), tmp_path)

    assert steps is not None
    assert steps.tools == ["read", "edit", "bash", "write", "patch"]
    assert steps.commands == ["rm db/scratch.sql"]
    assert steps.written == ["styles/site.css", "db/scratch.sql", "db/new.sql", "a.py"]
    assert stream_steps.read("opencode", "opencode: not logged in\n", tmp_path) is None


def test_links_are_read_from_the_diff_with_where_they_point() -> None:
    patch = (
        "diff --git a/styles/x.css b/styles/x.css\nnew file mode 120000\nindex 0..1\n"
        "--- /dev/null\n+++ b/styles/x.css\n@@ -0,0 +1 @@\n+../db/schema.sql\n"
        "\\ No newline at end of file\n"
        "diff --git a/styles/a.css b/styles/a.css\nnew file mode 100644\n"
        "--- /dev/null\n+++ b/styles/a.css\n@@ -0,0 +1 @@\n+a {}\n"
    )
    assert links_in(patch) == (("styles/x.css", "db/schema.sql"),)


def test_the_scope_rides_in_the_rules_block_as_rules() -> None:
    scope = ScopeSpec(paths=("styles/**",), commands=("npm *",), max_lines=200)
    assert rule_lines(narrowed(scope, ["styles/buttons/**"])) == [
        "- Write only files matching: styles/**, styles/buttons/** (this task)",
        "- Run only commands matching: npm *",
        "- Change at most 200 lines added or removed",
        "- Anything outside this scope waits for a human; none of it is committed.",
    ]
    assert rule_lines(ScopeSpec()) == []
