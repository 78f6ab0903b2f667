"""Agent CLIs' JSON event lines rendered for a person: table tests on real output.

Samples are the CLIs' own lines as recorded in shared/reference/real-clis.md and agent-clis.md
(Claude Code 2.1 stream-json, codex exec --json, opencode run --format json, goose stream-json).
"""

from __future__ import annotations

import pytest

from loopctl.backends.streams import MAX_WIDTH, render

CASES = [
    # Claude Code: init, a tool call, its result, a message, the result line (ok and error).
    (
        "claude",
        '{"type":"system","subtype":"init","cwd":"/r","session_id":"5","tools":["Edit"],'
        '"model":"claude-opus-4-8"}',
        "session started (model claude-opus-4-8)",
    ),
    (
        "claude",
        '{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use",'
        '"id":"toolu_1","name":"Edit","input":{"file_path":"/r/calc.py","old_string":"a - b",'
        '"new_string":"a + b"}}]}}',
        "tool Edit /r/calc.py",
    ),
    (
        "claude",
        '{"type":"user","message":{"role":"user","content":[{"type":"tool_result",'
        '"tool_use_id":"toolu_1","content":"1\\tdef add(a, b):\\n2\\t    return a - b\\n3\\t"}]}}',
        "result: 1 def add(a, b):",
    ),
    (
        "claude",
        '{"type":"assistant","message":{"content":[{"type":"text","text":"Fixed add()."}]}}',
        "Fixed add().",
    ),
    (
        "claude",
        '{"type":"result","subtype":"success","is_error":false,"num_turns":3,'
        '"result":"Fixed add().","total_cost_usd":0.003}',
        "done: 3 turns, $0.0030",
    ),
    (
        "claude",
        '{"type":"result","subtype":"success","is_error":true,'
        '"result":"Not logged in · Please run /login"}',
        "error: Not logged in · Please run /login",
    ),
    # codex exec --json
    ("codex", '{"type":"thread.started","thread_id":"01a22bdb"}', None),
    ("codex", '{"type":"turn.started"}', None),
    (
        "codex",
        '{"type":"item.completed","item":{"id":"item_0","type":"file_change","changes":'
        '[{"path":"REPO/calc.py","kind":"update"}],"status":"completed"}}',
        "edit update REPO/calc.py",
    ),
    (
        "codex",
        '{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":'
        '"/bin/bash -lc \\"sed -i \'s/a - b/a + b/\' calc.py\\"","aggregated_output":"",'
        '"status":"in_progress"}}',
        "$ /bin/bash -lc \"sed -i 's/a - b/a + b/' calc.py\"",
    ),
    (
        "codex",
        '{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":'
        '"ls","aggregated_output":"","exit_code":0,"status":"completed"}}',
        "exit 0",
    ),
    (
        "codex",
        '{"type":"item.completed","item":{"id":"item_1","type":"agent_message",'
        '"text":"Fixed add()."}}',
        "Fixed add().",
    ),
    (
        "codex",
        '{"type":"turn.completed","usage":{"input_tokens":200,"cached_input_tokens":0,'
        '"output_tokens":40}}',
        "turn done (200 in, 40 out tokens)",
    ),
    (
        "codex",
        '{"type":"error","message":"unexpected status 401 Unauthorized: bad key"}',
        "error: unexpected status 401 Unauthorized: bad key",
    ),
    (
        "codex",
        '{"type":"turn.failed","error":{"message":"We are experiencing high demand"}}',
        "turn failed: We are experiencing high demand",
    ),
    # opencode run --format json
    (
        "opencode",
        '{"type":"tool_use","timestamp":1796032220117,"sessionID":"ses_dd42","part":{"type":"tool",'
        '"tool":"edit","callID":"call_e75a","state":{"status":"completed","input":{"filePath":'
        '"REPO/calc.py","oldString":"return a - b","newString":"return a + b"},'
        '"output":"Edit applied successfully."}}}',
        "tool edit REPO/calc.py",
    ),
    (
        "opencode",
        '{"type":"step_finish","timestamp":1,"sessionID":"s","part":{"reason":"tool-calls",'
        '"type":"step-finish","tokens":{"total":120},"cost":0.0006}}',
        None,
    ),
    (
        "opencode",
        '{"type":"text","timestamp":1,"part":{"type":"text","text":"Fixed add()."}}',
        "Fixed add().",
    ),
    (
        "opencode",
        '{"type":"error","sessionID":"s","error":{"name":"APIError","data":{"message":"bad key",'
        '"statusCode":401,"isRetryable":false}}}',
        "error: bad key",
    ),
    # goose run --output-format stream-json
    (
        "goose",
        '{"type":"message","message":{"role":"assistant","content":[{"type":"toolRequest",'
        '"id":"t1","toolCall":{"status":"success","value":{"name":"developer__shell",'
        '"arguments":{"command":"pytest -q"}}}}]}}',
        "tool developer__shell pytest -q",
    ),
    ("goose", '{"type":"notification","extension_id":"developer","log":"x"}', None),
    ("goose", '{"type":"error","error":"provider refused"}', "error: provider refused"),
    ("goose", '{"type":"complete","total_tokens":120,"cost_usd":0.1}', "done: 120 tokens"),
    # Plain text: aider, a command agent, any CLI's stderr; and a JSON-looking plain line.
    ("aider", "Applied edit to calc.py", "Applied edit to calc.py"),
    ("command", "  ran 3 tests  ", "ran 3 tests"),
    ("codex", "{not json at all", "{not json at all"),
    ("claude", "   ", None),
]


@pytest.mark.parametrize(("backend", "line", "shown"), CASES)
def test_each_cli_line_renders_as_a_person_reads_it(
    backend: str, line: str, shown: str | None
) -> None:
    assert render(backend, line) == shown


def test_a_rendered_line_is_one_short_line_without_control_sequences() -> None:
    hostile = (
        '{"type":"item.completed","item":{"type":"agent_message","text":'
        '"\\u001b[2Jall checks passed\\nsecond line' + "x" * 1000 + '"}}'
    )

    shown = render("codex", hostile)

    assert shown is not None
    assert "\x1b" not in shown
    assert "\n" not in shown
    assert shown.startswith("all checks passed second line")
    assert len(shown) == MAX_WIDTH
    assert render("aider", "\x1b]8;;http://evil\x07click\x1b]8;;\x07") == "click"
