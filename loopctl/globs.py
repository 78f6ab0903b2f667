"""Path globs as loop definitions write them: `tests/**`, `src/**/*.py`, `conftest.py`.

Patterns are anchored at the repository root; `*` and `?` stay within one path segment and
`**` spans any number of segments, including none.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable


@functools.lru_cache(maxsize=512)
def compile_glob(pattern: str) -> re.Pattern[str]:
    """Translate one glob into an anchored regular expression."""
    parts: list[str] = []
    text = pattern.strip().lstrip("/")
    if text.startswith("./"):
        text = text[2:]
    i = 0
    while i < len(text):
        if text.startswith("**/", i):
            parts.append("(?:.*/)?")
            i += 3
        elif text.startswith("**", i):
            parts.append(".*")
            i += 2
        elif text[i] == "*":
            parts.append("[^/]*")
            i += 1
        elif text[i] == "?":
            parts.append("[^/]")
            i += 1
        elif text[i] == "[":
            end = text.find("]", i + 1)
            if end == -1:
                parts.append(re.escape(text[i]))
                i += 1
            else:
                body = text[i + 1 : end].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                parts.append(f"[{body}]")
                i = end + 1
        else:
            parts.append(re.escape(text[i]))
            i += 1
    # A pattern naming a folder ("tests/") covers everything inside it.
    suffix = ".*" if text.endswith("/") else "(?:/.*)?"
    return re.compile("^" + "".join(parts) + suffix + "$", re.S)


def matches(path: str, patterns: Iterable[str]) -> bool:
    """True when the repository-relative `path` matches any of `patterns`."""
    return any(compile_glob(p).match(path) for p in patterns)


def first_match(path: str, patterns: Iterable[str]) -> str | None:
    for pattern in patterns:
        if compile_glob(pattern).match(path):
            return pattern
    return None
