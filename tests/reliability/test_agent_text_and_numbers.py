"""Text and numbers from agents and task sources are data, with the sandbox off.

- Escape sequences (CSI, OSC, C1, bidi overrides) in an agent's question, result, output, check
  output and a task's title never reach `loopctl inbox` (plain or Rich), `inbox show`, `log`,
  INBOX.md or STATE.md; Rich markup is shown, not interpreted; Markdown cannot forge a heading
  or a link.
- Usage reported as `1e999`, `Infinity`, `NaN`, negative or 400 digits is clamped with a
  `usage_clamped` note; the run and every later one go on; an old log with such a value reads.
- Task-source JSON with `NaN`, infinities, huge numbers or 200,000-deep nesting fails the tick
  with one line and an inbox item, exit 1.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from support.cli import assert_clean_exit, loopctl_argv, run_loopctl
from support.journal import events
from support.repos import FAST_CHECK, PY, make_project, toml_value, write_config, write_loop

from loopctl.journal.events import EventLog, EventType
from loopctl.paths import ProjectPaths

AGENTS = Path(__file__).parent / "agents"
SANDBOX_OFF = '\n[sandbox]\nmode = "off"\n'
# ESC, the C1 range (CSI 0x9b, OSC 0x9d, ST 0x9c …), BEL/BS/CR, and the bidi overrides.
FORBIDDEN = re.compile("[\x1b\x07\x08\r\x80-\x9f\u202a-\u202e\u2066-\u2069]")
TITLE = "Fix it \x1b[2J\x1b]0;pwned\x07\x9b31m [bold]title[/bold]\n# Heading"
MAX_TOKENS = 10**12  # loopctl.usage.MAX_TOKENS, restated: the test must not trust the code


def _agent(repo: Path, script: str, *args: str) -> None:
    """agents/maker.toml running tests/reliability/agents/SCRIPT."""
    argv = [PY, str(AGENTS / script), *args]
    (repo / "agents" / "maker.toml").write_text(
        f'backend = "command"\nargv = {toml_value(argv)}\ntimeout = "60s"\n'
    )


def _config(repo: Path) -> None:
    write_config(
        repo,
        'version = 1\n\n[defaults]\nmaker = "maker"\n\n[conditions]\n'
        f'"tests green" = {toml_value(FAST_CHECK)}\n' + SANDBOX_OFF,
    )


def _no_controls(where: str, text: str) -> None:
    found = FORBIDDEN.findall(text)
    assert not found, f"{where} holds control characters {found!r}:\n{text}"


def _in_a_terminal(repo: Path, *args: str) -> str:
    """What `loopctl ARGS` prints on a real terminal (a pty), where tables are drawn by Rich."""
    main, child = pty.openpty()
    env = {**os.environ, "COLUMNS": "400", "LINES": "50", "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(
        loopctl_argv(*args), cwd=repo, stdout=child, stderr=child, stdin=child, env=env
    )
    os.close(child)
    chunks = []
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # EIO: the program closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(main)
    assert proc.wait(timeout=60) == 0
    return b"".join(chunks).decode("utf-8", "replace")


def test_escape_sequences_never_reach_the_approver(repo: Path, tmp_path: Path) -> None:
    make_project(repo, "fixer.py")
    _agent(repo, "prints_controls.py")
    _config(repo)
    tasks = tmp_path / "tasks.json"
    tasks.write_text(
        json.dumps([{"key": "ask-1", "title": TITLE}, {"key": "check-1", "title": TITLE}])
    )
    write_loop(
        repo,
        "triage",
        'goal = "tests green"\n\n[tasks]\n'
        f'command = ["cat", {json.dumps(str(tasks))}]\nid = "{{key}}"\nprompt = "{{title}}"\n'
        "\n[budget]\nmax_iterations = 1\n",
    )

    ran = run_loopctl(repo, "run", "triage", "--once")

    assert_clean_exit(ran, 1)  # one task waits for an answer, the other failed its check
    _no_controls("run output", ran.stdout + ran.stderr)
    kinds = sorted(e.data["kind"] for e in events(repo, EventType.INBOX_OPENED))
    assert kinds == ["escalation", "failed"]
    # Cleaned before it was stored: the log itself holds none of it (titles, output, answers).
    stored = [c for e in events(repo) for t in _strings(e.data) for c in FORBIDDEN.findall(t)]
    print(f"\ncontrol characters stored from a hostile agent's words: {len(stored)}")
    for event in events(repo):
        _no_controls(f"the {event.type} event", "\n".join(_strings(event.data)))
    listed = run_loopctl(repo, "inbox")
    assert_clean_exit(listed, 0)
    _no_controls("loopctl inbox", listed.stdout)
    assert "All checks passed" in listed.stdout  # the words stay; only their power goes
    drawn = _in_a_terminal(repo, "inbox")
    # Rich styles the header with its own escapes; the cells may hold none, and markup in
    # them is printed as written, not turned into style.
    for sequence in ("\x1b[2J", "\x1b]", "\x1bc"):
        assert sequence not in drawn
    # The terminal itself turns each newline into CR LF.
    _no_controls("Rich table cells", re.sub(r"\x1b\[[0-9;]*m", "", drawn).replace("\r\n", "\n"))
    assert "[bold red]markup[/bold red]" in drawn
    for opened in events(repo, EventType.INBOX_OPENED):
        shown = run_loopctl(repo, "inbox", "show", str(opened.data["id"]))
        # Not assert_clean_exit: the failed check's own output is a (Python) traceback.
        assert shown.returncode == 0, shown.stderr
        _no_controls(f"inbox show {opened.data['kind']}", shown.stdout)
        as_json = run_loopctl(repo, "inbox", "show", str(opened.data["id"]), "--json")
        _no_controls("inbox show --json", json.loads(as_json.stdout)["item"]["summary"])
    asked = run_loopctl(repo, "inbox", "show", str(_item(repo, "escalation")))
    assert "The agent asks:" in asked.stdout
    assert "[bold red]markup[/bold red]" in asked.stdout
    failed = run_loopctl(repo, "inbox", "show", str(_item(repo, "failed")))
    assert "Last check output:" in failed.stdout
    assert "Safe to approve" in failed.stdout  # the check's output is there, cleaned
    logged = run_loopctl(repo, "log")
    assert_clean_exit(logged, 0)
    _no_controls("loopctl log", logged.stdout)

    inbox_md = (repo / ".loop" / "INBOX.md").read_text()
    state_md = (repo / ".loop" / "STATE.md").read_text()
    for name, text in (("INBOX.md", inbox_md), ("STATE.md", state_md)):
        _no_controls(name, text)
        # Rendered as a Markdown viewer would (CommonMark, raw HTML allowed): agent text
        # makes no heading, no link, no image, no HTML of its own.
        html = MarkdownIt("commonmark").render(text)
        headings = re.findall(r"<h\d>(.*?)</h\d>", html)
        assert not [h for h in headings if "Approved" in h or "Heading" in h], headings
        assert 'evil.example"' not in html
        assert "<img" not in html
    assert "\\[click\\](https://evil.example)" in inbox_md
    assert "Fix it" in state_md


def _strings(value: object) -> list[str]:
    """Every string in a JSON-shaped value, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _item(repo: Path, kind: str) -> object:
    return next(
        e.data["id"] for e in events(repo, EventType.INBOX_OPENED) if e.data["kind"] == kind
    )


@pytest.mark.parametrize("literal", ["1e999", "Infinity", "-Infinity", "NaN", "-5", "9" * 400])
def test_unusable_usage_is_clamped_and_every_later_run_goes_on(repo: Path, literal: str) -> None:
    make_project(repo, "fixer.py")
    _agent(repo, "reports_usage.py", literal)
    _config(repo)
    write_loop(repo, "fix", 'goal = "tests green"\nprompt = "fix add"\n')

    first = run_loopctl(repo, "run", "fix", "--once")

    assert_clean_exit(first, 0)
    (finished,) = events(repo, EventType.AGENT_FINISHED)
    for name in ("input_tokens", "output_tokens"):
        value = finished.data[name]
        assert value is None or 0 <= value <= MAX_TOKENS, finished.data
    cost = finished.data["cost_usd"]
    assert cost is None or 0 <= cost <= 1_000_000, finished.data
    (note,) = [e for e in events(repo, EventType.NOTE) if e.data.get("what") == "usage_clamped"]
    assert "usage.input_tokens" in note.data["warning"]
    assert "total_cost_usd" in note.data["warning"]
    again = run_loopctl(repo, "run", "fix", "--once")
    assert_clean_exit(again, 0)
    for args in (("status", "--json"), ("log",), ("inbox",), ("replay", str(finished.run))):
        assert_clean_exit(run_loopctl(repo, *args), 0)


def test_a_result_line_nested_200000_deep_is_just_output(repo: Path) -> None:
    make_project(repo, "fixer.py")
    _agent(repo, "reports_usage.py", "deep")
    _config(repo)

    done = run_loopctl(repo, "goal", "tests green")

    assert_clean_exit(done, 0)
    (finished,) = events(repo, EventType.AGENT_FINISHED)
    assert finished.data["input_tokens"] is None


def test_an_old_log_with_a_huge_count_still_reads(repo: Path) -> None:
    # Written before usage was clamped: a 400-digit count and costs that are not numbers.
    make_project(repo, "fixer.py")
    _config(repo)
    write_loop(repo, "fix", 'goal = "tests green"\nprompt = "fix add"\n')
    assert_clean_exit(run_loopctl(repo, "run", "fix", "--once"), 0)
    (finished,) = events(repo, EventType.AGENT_FINISHED)
    log = EventLog(ProjectPaths(repo).events_file)
    for cost in (10**400, "lots", -3):
        log.append(
            EventType.AGENT_FINISHED,
            run=finished.run,
            loop="fix",
            task=finished.task,
            data={
                **finished.data,
                "input_tokens": 10**400,
                "output_tokens": "many",
                "cost_usd": cost,
            },
        )
    traces = repo.parent / "trace.json"

    for args in (
        ("status", "--json"),
        ("log",),
        ("replay", str(finished.run)),
        ("inbox",),
        ("traces", "export", str(finished.run), "--otlp-json", str(traces)),
        ("run", "fix", "--once"),
    ):
        assert_clean_exit(run_loopctl(repo, *args), 0)
    status = json.loads(run_loopctl(repo, "status", "--json").stdout)
    fix = next(s for s in status["status"] if s["loop"] == "fix")
    assert 0 <= fix["spend"]["tokens"] <= 4 * MAX_TOKENS


@pytest.mark.parametrize(
    "printed",
    [
        '[{"n": NaN}]',
        '[{"n": Infinity}]',
        '[{"n": -Infinity}]',
        '[{"n": 1e999}]',
        '[{"n": ' + "7" * 5000 + "}]",
        "[" * 200_000 + "]" * 200_000,
        '[{"n": 1, "deep": ' + "[" * 200 + "]" * 200 + "}]",
        '{"n": 1}\n{"n": NaN}\n',
    ],
    ids=["nan", "infinity", "minus-infinity", "1e999", "5000-digits", "deep", "200-deep", "jsonl"],
)
def test_unusable_task_json_fails_the_tick_with_one_line(
    repo: Path, tmp_path: Path, printed: str
) -> None:
    make_project(repo, "fixer.py")
    _config(repo)
    source = tmp_path / "tasks.json"
    source.write_text(printed)
    write_loop(
        repo,
        "triage",
        f'prompt = "task {{n}}"\n\n[tasks]\ncommand = ["cat", {json.dumps(str(source))}]\n'
        'id = "t-{n}"\n',
    )

    done = run_loopctl(repo, "run", "triage", "--once")

    assert_clean_exit(done, 1)
    assert "unexpected error" not in done.stderr
    assert not (Path(os.environ["LOOPCTL_HOME"]) / "crashes").exists()
    (item,) = events(repo, EventType.INBOX_OPENED)
    assert item.data["kind"] == "failed"
    assert "loopctl cannot use" in item.data["summary"]
    assert "\n" not in item.data["summary"]
    assert events(repo, EventType.AGENT_FINISHED) == []
    # The next tick reads the log and tries again, failing the same clean way.
    assert_clean_exit(run_loopctl(repo, "run", "triage", "--once"), 1)


def test_a_github_source_printing_nan_fails_the_tick_too(repo: Path, tmp_path: Path) -> None:
    # A `gh` on PATH that is logged in and lists issues as JSON with NaN in it.
    folder = tmp_path / "bin"
    folder.mkdir()
    gh = folder / "gh"
    gh.write_text(
        f"#!{PY}\nimport sys\n"
        "if sys.argv[1:2] == ['auth']:\n    raise SystemExit(0)\n"
        'print(\'[{"number": 1, "title": "x", "body": "", "labels": [], "score": NaN}]\')\n'
    )
    gh.chmod(0o755)
    make_project(repo, "fixer.py")
    _config(repo)
    write_loop(repo, "issues", 'prompt = "fix"\n\n[tasks]\nsource = "github"\nkind = "issues"\n')
    env = {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}

    done = run_loopctl(repo, "run", "issues", "--once", env=env)

    assert_clean_exit(done, 1)
    (item,) = events(repo, EventType.INBOX_OPENED)
    assert "loopctl cannot use" in item.data["summary"]


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain text", "plain text"),
        ("tab\tand\nnewline stay", "tab\tand\nnewline stay"),
        ("\x1b[2J\x1b[Hcleared", "cleared"),
        ("\x1b]0;title\x07after", "after"),
        ("\x1b]8;;https://x\x1b\\link\x1b]8;;\x1b\\", "link"),
        ("c1 \x9b31mred\x9d0;t\x9c done", "c1 red done"),
        ("cr\r\nlf", "cr\nlf"),
        ("bell\x07 bs\x08 nul\x00 del\x7f", "bell bs nul del"),
        ("\u202eevil\u202c", "evil"),
        ("trailing escape \x1b", "trailing escape "),
    ],
)
def test_strip_controls_table(raw: str, shown: str) -> None:
    from loopctl.text import strip_controls

    assert strip_controls(raw) == shown


@pytest.mark.parametrize(
    ("raw", "rendered"),
    [
        ("fix add()", "fix add()"),
        ("# Approved", "\\# Approved"),
        ("[click](https://x)", "\\[click\\](https://x)"),
        ("<img src=x>", "\\<img src=x\\>"),
        ("*bold* _it_ `code` a|b ~x~", "\\*bold\\* \\_it\\_ \\`code\\` a\\|b \\~x\\~"),
        ("1. list", "1\\. list"),
        ("- item\n== heading", "\\- item\n\\== heading"),
    ],
)
def test_escape_markdown_table(raw: str, rendered: str) -> None:
    from loopctl.text import code_span, escape_markdown

    assert escape_markdown(raw) == rendered
    html = MarkdownIt("commonmark").render(escape_markdown(raw))
    assert "<a " not in html
    assert "<h" not in html.replace("<hr", "")
    assert MarkdownIt("commonmark").render(code_span("a `` b")).count("<code>") == 1
