"""A scan of a maker's diff for changes that tamper with the test run itself.

The checks run the maker's code, and code that runs inside the test process can forge what
the runner reports: an exit handler that prints `1 passed` after the real `1 failed`, a hook
that resets the exit status, a patched runner class. No in-process check can rule that out, so
the diff is read instead: an added line that matches a rule below keeps the attempt from
passing by itself, and a human (or the checker agent) looks at the quoted lines.

Pure: a unified diff's text (or files' contents) in, findings with `path:line` and the quoted
line out. Every rule is one row of `RULES`, with its name and the one-line reason a human reads.
The rules were tuned to raise nothing on the corpus of real projects (tests/corpus/).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import PurePosixPath
from typing import Any

# Tests switch this off to show that each hostile variant succeeds without the scan; nothing
# else changes it.
DEFENCE = True
# How much of a flagged line is quoted: enough to recognise it, never a file's worth.
QUOTE_CHARS = 160


class Lang(StrEnum):
    PYTHON = "python"
    NODE = "node"
    CODE = "code"  # any source or script file (a summary string can be printed from any)


_PYTHON = frozenset({".py", ".pyw", ".pyi", ".pth"})
_NODE = frozenset({".js", ".cjs", ".mjs", ".ts", ".cts", ".mts", ".jsx", ".tsx"})
_OTHER_CODE = frozenset(
    {".sh", ".bash", ".zsh", ".go", ".rs", ".rb", ".pl", ".php", ".lua", ".c", ".h", ".cc"}
)
# Configuration that starts or steers a runner: its argv lives there, not in source files.
_RUNNER_CONFIG = frozenset(
    {
        "package.json",
        "pytest.ini",
        "tox.ini",
        "setup.cfg",
        "pyproject.toml",
        "makefile",
        "justfile",
        "noxfile.py",
    }
)


def languages(path: str) -> frozenset[Lang]:
    """The rule families a file is read with (none: documentation, data, assets)."""
    name = PurePosixPath(path).name.lower()
    suffix = PurePosixPath(name).suffix
    if suffix in _PYTHON:
        return frozenset({Lang.PYTHON, Lang.CODE})
    if suffix in _NODE:
        return frozenset({Lang.NODE, Lang.CODE})
    if suffix in _OTHER_CODE or name in _RUNNER_CONFIG:
        return frozenset({Lang.CODE})
    return frozenset()


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    langs: frozenset[Lang]
    pattern: re.Pattern[str]
    reason: str
    # Only in a file whose added lines also match `context`, or whose path matches `where`:
    # an exit is harmless in a script's main, and ends the run's verdict inside an exit
    # handler, a signal handler, `__del__` or a test set-up file.
    context: re.Pattern[str] | None = None
    where: re.Pattern[str] | None = None

    def applies(self, path: str, added: str) -> bool:
        if self.context is None and self.where is None:
            return True
        return bool(
            (self.context is not None and self.context.search(added))
            or (self.where is not None and self.where.search(path))
        )


def _rule(
    name: str,
    langs: Iterable[Lang],
    pattern: str,
    reason: str,
    context: str | None = None,
    where: str | None = None,
) -> Rule:
    return Rule(
        name,
        frozenset(langs),
        re.compile(pattern),
        reason,
        re.compile(context) if context else None,
        re.compile(where, re.IGNORECASE) if where else None,
    )


_PY = (Lang.PYTHON,)
_JS = (Lang.NODE,)
_ANY = (Lang.CODE,)
# A number where a summary has one: a literal, or a placeholder that prints one.
_N = r"(?:\d+|\{[^{}]*\}|\$\{[^{}]*\}|%[sdi]|%\(\w+\)[sdi])"
# Where code runs after the runner decided: exit handlers, signal handlers, finalisers and the
# runner's own end-of-session hooks.
_PY_HANDLERS = (
    r"\batexit\b|\bsignal\.signal\s*\(|\bdef\s+__del__\b|\bweakref\.finalize\b"
    r"|\bdef\s+pytest_(?:unconfigure|sessionfinish|terminal_summary)\b"
)
# Files that are not tests (their changes are refused anyway) nor a project's pytest plugin.
_NOT_PY_TESTS = (
    r"^(?!(?:.*/)?(?:tests?|testing)/)(?!(?:.*/)?(?:test_[^/]*|[^/]*_test|conftest)\.py$)"
)
_JS_HANDLERS = r"""\bprocess\.(?:on|once|prependListener)\s*\(\s*['"`](?:exit|beforeExit)"""
# A command-line entry point ends its process by design; any other module should not.
_JS_NOT_CLI = r"^(?!(?:.*/)?(?:bin|cli|scripts?)/)(?!(?:.*/)?cli\.[cm]?[jt]sx?$)"

RULES: tuple[Rule, ...] = (
    # --- ending the process from where the runner's verdict is already decided ---------------
    _rule(
        "exit-handler",
        _PY,
        r"\batexit\s*\.\s*register\b|\bfrom\s+atexit\s+import\b|\bweakref\.finalize\s*\("
        r"|['\"]atexit['\"]",
        "registers code that runs after the test runner has printed its verdict",
    ),
    _rule(
        "hard-exit",
        _PY,
        r"\bos\s*\.\s*_exit\s*\(|\bfrom\s+os\s+import\s+[^#]*\b_exit\b|['\"]_exit['\"]",
        "ends the process at once, skipping the test runner's own exit status",
    ),
    _rule(
        "exit-in-handler",
        _PY,
        r"\bsys\s*\.\s*exit\s*\(|\bSystemExit\b|(?<![\w.])(?:exit|quit)\s*\(|['\"]exit['\"]",
        "exits from an exit handler, signal handler or finaliser, replacing the run's status",
        context=_PY_HANDLERS,
    ),
    _rule(
        "session-end-hook",
        _PY,
        r"\bdef\s+pytest_(?:unconfigure|sessionfinish|terminal_summary)\s*\(",
        "a pytest hook that runs after the tests, where the reported result can be rewritten",
    ),
    _rule(
        "node-exit-handler",
        _JS,
        _JS_HANDLERS,
        "runs code as the Node process exits, after the test runner has decided",
    ),
    _rule(
        "node-exit",
        _JS,
        r"\bprocess\s*\.\s*(?:exit|reallyExit|abort|kill)\s*\(",
        "ends the Node process from code the tests load, in place of the runner's own exit",
        context=_JS_HANDLERS,
        where=_JS_NOT_CLI,
    ),
    # --- changing the exit status ---------------------------------------------------------------
    _rule(
        "exit-status",
        _PY,
        r"\bexitstatus\b|\btestsfailed\b|\bExitCode\s*\.\s*OK\b|\b_exitcode\b",
        "sets the status pytest exits with, whatever the tests did",
    ),
    _rule(
        "node-exit-code",
        _JS,
        r"\bprocess\s*\.\s*exitCode\s*=[^=]|\bprocess\s*\[\s*['\"]exitCode['\"]\s*\]\s*=",
        "sets the status Node exits with, whatever the tests did",
    ),
    # --- patching the runner's internals --------------------------------------------------------
    _rule(
        "pytest-internals",
        _PY,
        r"\b_pytest\b|\bpytest\s*\.\s*(?:main|exit)\s*\(|\bTerminalReporter\b|\bpytest_runtest_makereport\b"
        r"|\bpytest_report_teststatus\b|\bsys\.modules\s*\[\s*['\"](?:_?pytest|pluggy)\b",
        "reaches into pytest itself, which decides and reports the result",
    ),
    _rule(
        "pytest-in-code",
        _PY,
        r"^\s*(?:import\s+pytest\b|from\s+pytest\s+import\b)|\bpytest_plugins\s*=",
        "imports pytest into code that is not a test, where it can steer the run from inside",
        where=_NOT_PY_TESTS,
    ),
    _rule(
        "unittest-internals",
        _PY,
        r"\bunittest\s*\.\s*(?:TestResult|TextTestResult|TextTestRunner|TestProgram|main|runner"
        r"|result|suite|loader)\b|\b(?:TestResult|TextTestResult|TextTestRunner)\s*\.\s*\w+\s*="
        r"|\bwasSuccessful\b|\bsys\.modules\s*\[\s*['\"]unittest\b"
        r"|\bfrom\s+unittest(?:\.\w+)?\s+import\s+[^#]*\b(?:TestResult|TextTestResult"
        r"|TextTestRunner|TestProgram|main|runner|result)\b|\bimport\s+unittest\.(?:runner|result|main)\b",
        "reaches into unittest's runner or result, which decide and report the result",
    ),
    _rule(
        "test-globals",
        _JS,
        r"\b(?:global|globalThis|window)\s*(?:\.\s*|\[\s*['\"])"
        r"(?:test|it|describe|expect|jest|vi|beforeAll|afterAll|beforeEach|afterEach)\b"
        r"(?:['\"]\s*\])?\s*=[^=]"
        r"|^\s*(?:var\s+|let\s+|const\s+)?expect\s*=(?!=|\s*require\s*\(|\s*await\s+import\b)"
        r"|\b(?:expect|test|it)\s*\.\s*\w+\s*=[^=]",
        "replaces the test framework's own globals (test, it, expect), so assertions stop failing",
    ),
    _rule(
        "runner-internals-node",
        _JS,
        r"\b(?:@jest|jest-circus|jest-runner|@vitest/runner|vitest/runners|vitest/node"
        r"|jest-reporters?|node:test/reporters)\b|\b(?:jest|vi)\s*\.\s*spyOn\s*\(\s*process\b",
        "reaches into the Node test runner or its reporters, which decide the result",
    ),
    # --- reading where the report goes -----------------------------------------------------------
    _rule(
        "report-path",
        (Lang.PYTHON, Lang.NODE, Lang.CODE),
        r"--junit-?xml\b|\bjunitxml\b|\bjunit_xml\b|(?i:--output-?file)\b|\boutputFile['\"]?\s*:"
        r"|--json-report(?:-file)?\b|\bjson_report\b|\bLOOPCTL_\w*REPORT\w*\b"
        r"|--(?:report|result)-?log\b|--test-reporter(?:-destination)?\b"
        r"|\bloopctl_(?:pytest|unittest)_\w+",
        "names the report file the results are read from, which the code under test may rewrite",
    ),
    _rule(
        "argv-scan",
        (Lang.PYTHON, Lang.NODE),
        r"\b(?:sys|process)\s*\.\s*(?:argv|execArgv)\b[^#\n]*(?:xml|json|report|output)",
        "looks in the runner's own command line for where results go",
    ),
    _rule(
        "output-rewrite",
        (Lang.PYTHON, Lang.NODE),
        r"\bsys\s*\.\s*(?:__)?(?:stdout|stderr)(?:__)?\s*(?:\.\s*write\s*)?=[^=]"
        r"|\bbuiltins\s*\.\s*print\s*=[^=]|\bredirect_(?:stdout|stderr)\b"
        r"|\bprocess\s*\.\s*(?:stdout|stderr)\s*\.\s*write\s*=[^=]"
        r"|\bconsole\s*\.\s*(?:log|info|error|warn)\s*=[^=]"
        r"|\.replace\s*\(\s*(?:/|['\"`])[^'\"`/]*\b(?:failed|FAILED|failures?|errors?|FAIL)\b",
        "replaces or rewrites the output the test runner's summary is printed to",
    ),
    # --- printing something that reads as a runner's summary -------------------------------------
    _rule(
        "summary-line",
        _ANY,
        r"(?i:['\"`][^'\"`]*?" + _N + r"\s+(?:tests?\s+)?(?:passed|failed)\b)"
        r"|['\"`][^'\"`]*?\b(?:Tests?|Test Suites):\s+" + _N + r"\s+(?:passed|failed)\b"
        r"|['\"`][^'\"`]*?\bRan\s+" + _N + r"\s+tests?\s+in\b"
        r"|['\"`][^'\"`]*?\btest result:\s+(?:ok|FAILED)\b"
        r"|['\"`](?:\\n)*ok\s+(?:\\t|\t|\s{2,})|['\"`](?:\\n)*---\s+PASS:"
        r"|['\"`][^'\"`]*?#\s+(?:pass|fail)\s+" + _N,
        "prints a line that reads like a test runner's summary, where verdicts are read from",
    ),
    _rule(
        "summary-word",
        _ANY,
        r"\b(?i:print(?:ln|f)?|write(?:lines|ln)?|puts|echo|console\s*\.\s*\w+|log|info)\b[^\n]*"
        r"(?:['\"`]\s*(?:\\n)*(?:OK|PASS|FAIL)(?:\s*\(|\s*(?:\\[nr])*['\"`])"
        r"|['\"`]\s*(?:tests?\s+)?(?:passed|failed)(?:\s+in\b|,|\s*['\"`]))",
        "prints the word a runner ends its report with (unittest's OK, go's PASS, `passed in`)",
    ),
)

_RULE_NAMES = frozenset(rule.name for rule in RULES)


@dataclass(frozen=True, slots=True)
class AddedLine:
    path: str
    line: int  # in the new file, from 1
    text: str


@dataclass(frozen=True, slots=True)
class Finding:
    rule: str
    path: str
    line: int
    text: str  # the added line, stripped and cut to QUOTE_CHARS
    reason: str

    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def describe(self) -> str:
        """`path:line: `quoted line` (rule: reason)`, as the inbox shows it."""
        return f"{self.where()}: `{self.text}` ({self.rule}: {self.reason})"

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "path": self.path,
            "line": self.line,
            "text": self.text,
            "reason": self.reason,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Finding:
        return cls(
            rule=str(data.get("rule", "")),
            path=str(data.get("path", "")),
            line=int(data.get("line") or 0),
            text=str(data.get("text", "")),
            reason=str(data.get("reason", "")),
        )


# --- reading a diff ------------------------------------------------------------------------------

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def added_lines(diff: str) -> list[AddedLine]:
    """The lines a unified diff (`git diff` output) adds, with their new path and line."""
    found: list[AddedLine] = []
    path: str | None = None
    number = 0
    in_hunk = False
    for raw in diff.splitlines():
        if raw.startswith("diff --git "):
            path, in_hunk = None, False
            continue
        if not in_hunk and raw.startswith("+++ "):
            target = diff_path(raw[4:])
            path = target
            continue
        if raw.startswith("@@"):
            match = _HUNK.match(raw)
            in_hunk = match is not None and path is not None
            number = int(match.group(1)) if match else 0
            continue
        if not in_hunk or path is None:
            continue
        if raw.startswith("+"):
            found.append(AddedLine(path, number, raw[1:]))
            number += 1
        elif raw.startswith(" ") or raw == "":
            number += 1
        elif raw.startswith("-") or raw.startswith("\\"):
            continue
        else:
            in_hunk = False
    return found


def diff_path(field: str) -> str | None:
    """The path of a `+++` or `---` header (`b/x`, `"b/odd\\tname"`; None for /dev/null)."""
    # git ends a header whose name holds a space with a tab; a tab in a name is quoted.
    field = field.rstrip("\n").removesuffix("\t")
    if not field.startswith('"'):
        field = field.split("\t")[0]
    if field.startswith('"') and field.endswith('"'):
        field = _unquote(field[1:-1])
    if field == "/dev/null":
        return None
    return field[2:] if field.startswith(("a/", "b/", "c/", "i/", "o/", "w/")) else field


def _unquote(text: str) -> str:
    """git's C-style quoting of an unusual path, undone (octal bytes as UTF-8)."""
    out = bytearray()
    i = 0
    escapes = {"n": b"\n", "t": b"\t", '"': b'"', "\\": b"\\", "a": b"\a", "b": b"\b"}
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in "01234567" and i + 3 < len(text) + 1:
                out.append(int(text[i + 1 : i + 4], 8) & 0xFF)
                i += 4
                continue
            out += escapes.get(nxt, nxt.encode())
            i += 2
            continue
        out += char.encode()
        i += 1
    return out.decode("utf-8", "replace")


def lines_of_files(files: Mapping[str, str]) -> list[AddedLine]:
    """Whole files read as if every line were added (a new project, or a corpus)."""
    return [
        AddedLine(path, number, text)
        for path, content in files.items()
        for number, text in enumerate(content.splitlines(), start=1)
    ]


# --- scanning ------------------------------------------------------------------------------------


def _is_comment(text: str, langs: frozenset[Lang]) -> bool:
    stripped = text.lstrip()
    if Lang.PYTHON in langs:
        return stripped.startswith("#")
    if Lang.NODE in langs:
        return stripped.startswith(("//", "/*", "*"))
    return stripped.startswith(("#", "//"))


def scan(lines: Iterable[AddedLine]) -> list[Finding]:
    """Every added line a rule matches, one finding per line (its first rule), in order."""
    by_path: dict[str, list[AddedLine]] = {}
    for one in lines:
        by_path.setdefault(one.path, []).append(one)
    findings: list[Finding] = []
    for path, added in by_path.items():
        langs = languages(path)
        if not langs:
            continue
        code = [a for a in added if not _is_comment(a.text, langs)]
        text = "\n".join(a.text for a in code)
        rules = [rule for rule in RULES if rule.langs & langs and rule.applies(path, text)]
        for line in code:
            rule = next((r for r in rules if r.pattern.search(line.text)), None)
            if rule is not None:
                findings.append(Finding(rule.name, path, line.line, _quote(line.text), rule.reason))
    return findings


def scan_diff(diff: str) -> list[Finding]:
    """`scan` of the lines a unified diff adds (nothing while the defence is off)."""
    return scan(added_lines(diff)) if DEFENCE else []


def _quote(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= QUOTE_CHARS else flat[: QUOTE_CHARS - 1] + "…"


def summary(findings: Iterable[Finding], limit: int = 3) -> str:
    """The inbox item's one line: 'the change looks like it tampers with the test run: …'."""
    found = list(findings)
    shown = "; ".join(f"{f.where()} `{f.text}`" for f in found[:limit])
    more = f" and {len(found) - limit} more" if len(found) > limit else ""
    return f"the change looks like it tampers with the test run: {shown}{more}"


def rule_table() -> list[tuple[str, str]]:
    """(name, reason) of every rule, in order: what the README's table lists."""
    return [(rule.name, rule.reason) for rule in RULES]
