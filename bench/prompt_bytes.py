"""What loopctl sends to a model, against naive prompts, as skills, attempts and turns pile up.

Run: python bench/prompt_bytes.py

1. A maker prompt with 50 installed skills (3 chosen by the loop) and 0..100 earlier attempts,
   against a naive prompt that inlines every skill and the whole history.
   Goal: at most 0.1x the naive size at 100 attempts, and flat as attempts grow.
2. A 100-turn session of loopctl's own agent (backend openai) against a local scripted server,
   each turn reading a 6 KB file: tokens sent over the session with and without compaction.
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from loopctl.definitions.skills import Skill
from loopctl.engine.prompts import AttemptSummary, MakerContext, maker_prompt
from loopctl.secrets import Redactor
from loopctl.toolagent.session import SessionConfig, run_session
from loopctl.toolagent.wire import wire_for

TASK = "Make the checks of PR #42 (Fix the parser) pass. " * 10
INSTRUCTIONS = "Keep changes minimal. Never edit tests. " * 10
RULES = ["Never weaken a test.", "Keep the diff small."]


sys.path.insert(0, str(Path(__file__).parent))
from results import Row  # noqa: E402


def make_skills(folder: Path, count: int) -> list[Skill]:
    """`count` skills of about 5 KB each (valid SKILL.md files: their bodies really load)."""
    skills = []
    for index in range(count):
        name = f"skill-{index:02d}"
        path = folder / name / "SKILL.md"
        path.parent.mkdir(parents=True)
        description = f"Skill number {index} does a useful thing when asked. " * 3
        body = "\n".join(f"Step {n}: do the careful thing number {n}." for n in range(120))
        path.write_text(f'---\nname: {name}\ndescription: "{description}"\n---\n{body}\n')
        skills.append(Skill(name=name, description=description, path=path))
    assert skills[0].instructions(), "the bench skills must parse"
    return skills


def attempts(count: int) -> list[AttemptSummary]:
    """Failed attempts, each with 200 lines of check output."""
    output = "\n".join(f"E   AssertionError: value {n} differs" for n in range(200))
    return [
        AttemptSummary(
            n, "failed", f"check `pytest -q` exited 1: failing test_{n % 7}", f"fp{n:08x}", output
        )
        for n in range(1, count + 1)
    ]


def naive_prompt(skills: list[Any], earlier: list[AttemptSummary], attempt: int) -> str:
    """Everything inlined: every skill's body and every attempt's full output."""
    parts = [f"# Task pr-42 (attempt {attempt})", TASK, "# Goal", "tests green", "# Rules"]
    parts += [INSTRUCTIONS, *RULES]
    parts += [f"## Skill {s.name}\n{s.description}\n{s.instructions()}" for s in skills]
    parts += [
        f"## Attempt {a.number}: {a.verdict} [{a.fingerprint}]\n{a.reason}\n{a.output_tail}"
        for a in earlier
    ]
    return "\n\n".join(parts)


def prompt_table() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        skills = make_skills(Path(tmp), 50)
        print("1. maker prompt: 50 skills installed (3 given in full)")
        print(f"{'attempts':>8}  {'loopctl bytes':>13}  {'naive bytes':>11}  {'ratio':>6}")
        for count in (0, 1, 10, 25, 50, 100):
            earlier = attempts(count)
            ctx = MakerContext(
                task_id="pr-42",
                task_prompt=TASK,
                goal="tests green",
                check="pytest -q",
                instructions=INSTRUCTIONS,
                rules=RULES,
                protected=["tests/**", "conftest.py", "pyproject.toml"],
                scope=[],
                skills=skills,
                full_skills=skills[:3],
                attempts=earlier,
                attempt_number=count + 1,
            )
            ours = len(maker_prompt(ctx).encode("utf-8"))
            naive = len(naive_prompt(skills, earlier, count + 1).encode("utf-8"))
            print(f"{count:8d}  {ours:13d}  {naive:11d}  {ours / naive:6.3f}")


class _Server:
    """Answers every chat completion with one read_file call, then "done" after `turns`."""

    def __init__(self, turns: int) -> None:
        self.turns = turns
        self.calls = 0
        self.bytes_in = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers["content-length"]))
                outer.calls += 1
                outer.bytes_in += len(raw)
                done = outer.calls > outer.turns
                message: dict[str, Any] = {"role": "assistant", "content": "done" if done else ""}
                if not done:
                    arguments = json.dumps({"path": "big.txt"})
                    message["tool_calls"] = [
                        {
                            "id": f"c{outer.calls}",
                            "type": "function",
                            "function": {"name": "read_file", "arguments": arguments},
                        }
                    ]
                body = json.dumps(
                    {
                        "choices": [{"message": message, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": len(raw) // 4, "completion_tokens": 20},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"


def session_tokens(window: int, turns: int = 100) -> tuple[int, int, int, int]:
    server = _Server(turns)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "big.txt").write_text("".join(f"line {n}: {'x' * 40}\n" for n in range(120)))
        result = run_session(
            SessionConfig(
                wire=wire_for("openai"),
                base_url=server.url,
                model="bench",
                api_key=None,
                instructions=INSTRUCTIONS,
                prompt=f"# Task pr-42\n{TASK}\n\n# Goal\ntests green\n\n# Rules\n- "
                + "\n- ".join(RULES),
                worktree=root,
                tool_env={},
                redactor=Redactor([]),
                max_turns=turns + 5,
                context_window=window,
            )
        )
    server.httpd.shutdown()
    assert result.status == "ok", result
    return server.bytes_in // 4, max(result.request_tokens), result.compactions, result.turns


def session_table() -> None:
    print()
    print("2. a 100-turn session of loopctl's own agent, each turn reading a 6 KB file")
    print(f"{'context':>22}  {'tokens sent':>11}  {'largest request':>15}  {'compactions':>11}")
    for label, window in (("no compaction", 10_000_000), ("window 32k tokens", 32_000),
                          ("window 16k tokens", 16_000)):  # fmt: skip
        total, largest, compactions, _ = session_tokens(window)
        print(f"{label:>22}  {total:11d}  {largest:15d}  {compactions:11d}")


def measure() -> list[Row]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        skills = make_skills(Path(tmp), 50)
        sizes = {}
        for count in (10, 100):
            earlier = attempts(count)
            ctx = MakerContext(
                task_id="pr-42", task_prompt=TASK, goal="tests green", check="pytest -q",
                instructions=INSTRUCTIONS, rules=RULES,
                protected=["tests/**", "conftest.py", "pyproject.toml"], scope=[],
                skills=skills, full_skills=skills[:3], attempts=earlier, attempt_number=count + 1,
            )  # fmt: skip
            ours = len(maker_prompt(ctx).encode("utf-8"))
            naive = len(naive_prompt(skills, earlier, count + 1).encode("utf-8"))
            sizes[count] = ours
            rows.append(Row(f"maker prompt, 50 skills, {count} attempts, vs naive", ours, "B",
                            naive, "<= 0.1x", ours / naive <= 0.1))  # fmt: skip
        flat = abs(sizes[100] - sizes[10]) <= 64
        rows.append(Row("maker prompt growth from 10 to 100 attempts", sizes[100] - sizes[10],
                        "B", goal="flat", met=flat))  # fmt: skip
    full, _, _, _ = session_tokens(10_000_000)
    compacted, largest, compactions, _ = session_tokens(32_000)
    note = f"{compactions} compactions, largest request {largest}"
    rows.append(Row("100-turn HTTP agent session, tokens sent, 32k window vs none", compacted,
                    "tok", full, note=note))  # fmt: skip
    return rows


def main() -> None:
    prompt_table()
    session_table()


if __name__ == "__main__":
    main()
