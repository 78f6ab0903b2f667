"""Credential isolation: the environment a child gets, and redaction of what it must not see."""

from __future__ import annotations

import base64
import functools
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import AnyStr
from urllib.parse import quote, quote_plus

SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH")
BASE_ALLOW = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TMPDIR", "USER", "SHELL", "TZ")
LOOPCTL_PREFIX = "LOOPCTL_"
REDACTED = "[REDACTED]"

# Redacting very short values ("1", "true") would shred ordinary output for no gain.
MIN_SECRET_LENGTH = 6


@functools.cache  # asked of every variable for each git call: a run makes hundreds
def is_secret_name(name: str) -> bool:
    """True if a variable's name marks its value as a credential."""
    upper = name.upper()
    return any(marker in upper for marker in SECRET_MARKERS)


def _patterns(allow: Iterable[str]) -> tuple[frozenset[str], tuple[str, ...]]:
    # A bare string is a likely slip for a one-element list; iterating it would allow letters.
    items = (allow,) if isinstance(allow, str) else tuple(allow)
    exact = frozenset(item for item in items if not item.endswith("*"))
    prefixes = tuple(item[:-1] for item in items if item.endswith("*"))
    return exact, prefixes


def _allowed(name: str, exact: frozenset[str], prefixes: tuple[str, ...]) -> bool:
    return name in exact or any(name.startswith(prefix) for prefix in prefixes)


def _passes(name: str, exact: frozenset[str], prefixes: tuple[str, ...]) -> bool:
    if _allowed(name, exact, prefixes):
        return True
    # GIT_DIR, GIT_INDEX_FILE and friends would point git in the worktree at the wrong repository.
    if is_secret_name(name) or name.startswith("GIT_"):
        return False
    return name in BASE_ALLOW or name.startswith(LOOPCTL_PREFIX)


def build_env(
    *,
    allow: Iterable[str] = (),
    extra: Mapping[str, str] | None = None,
    source: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The scrubbed environment for a child: base names, LOOPCTL_*, `allow`, then `extra`."""
    exact, prefixes = _patterns(allow)
    origin = os.environ if source is None else source
    env = {name: value for name, value in origin.items() if _passes(name, exact, prefixes)}
    if extra:
        env.update(extra)
    return env


def withheld_values(
    *, allow: Iterable[str] = (), source: Mapping[str, str] | None = None
) -> list[str]:
    """Values of secret-looking variables that `build_env` with the same `allow` withholds."""
    exact, prefixes = _patterns(allow)
    origin = os.environ if source is None else source
    values: list[str] = []
    for name, value in origin.items():
        if not is_secret_name(name) or _allowed(name, exact, prefixes):
            continue
        if len(value) >= MIN_SECRET_LENGTH and value not in values:
            values.append(value)
    return values


def encoded_forms(secret: str) -> set[str]:
    """How a secret may reappear after encoding: URL-quoted, or inside any base64 text.

    Base64 of a value depends on where it starts in the encoded stream (offset mod 3), so for
    each alignment keep only the characters determined by the secret's own bits.
    """

    raw = secret.encode("utf-8")
    forms = {quote(secret, safe=""), quote_plus(secret)}
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode("ascii")
        first = -(-offset * 8 // 6)  # the first character whose bits all belong to the secret
        last = (offset + len(raw)) * 8 // 6  # one past the last such character
        fragment = encoded[first:last]
        if len(fragment) >= 8:
            forms.add(fragment)
            forms.add(fragment.translate(str.maketrans("+/", "-_")))
    forms.discard(secret)
    return {form for form in forms if len(form) >= MIN_SECRET_LENGTH}


def _expand(secrets: Iterable[str]) -> tuple[str, ...]:
    found: set[str] = set()
    for secret in secrets:
        if not secret:
            continue
        found.add(secret)
        found.update(encoded_forms(secret))
        # Output is redacted line by line, so a multi-line value (a PEM key) is caught per line.
        if "\n" in secret:
            lines = (line.strip("\r") for line in secret.split("\n"))
            found.update(line for line in lines if len(line) >= MIN_SECRET_LENGTH)
    return tuple(sorted(found, key=lambda s: (-len(s), s)))


def masked_regions(text: AnyStr, needles: Sequence[AnyStr]) -> list[tuple[int, int]]:
    """Where `text` holds a secret, as sorted (start, end) regions: overlapping matches make
    one region, so that no fragment of either survives."""
    spans: list[tuple[int, int]] = []
    for needle in needles:
        start = text.find(needle)
        while start != -1:
            spans.append((start, start + len(needle)))
            start = text.find(needle, start + 1)
    spans.sort()
    regions: list[tuple[int, int]] = []
    for start, end in spans:
        if regions and start < regions[-1][1]:
            regions[-1] = (regions[-1][0], max(regions[-1][1], end))
        else:
            regions.append((start, end))
    return regions


def _redact(text: AnyStr, needles: Sequence[AnyStr], mask: AnyStr) -> AnyStr:
    regions = masked_regions(text, needles)
    if not regions:
        return text
    parts: list[AnyStr] = []
    cursor = 0
    for start, end in regions:
        parts += [text[cursor:start], mask]
        cursor = end
    parts.append(text[cursor:])
    return text[:0].join(parts)


class Redactor:
    """Replaces known secret values with [REDACTED] in text and bytes."""

    __slots__ = ("_secret_bytes", "_secrets")

    def __init__(self, secrets: Iterable[str]) -> None:
        self._secrets = _expand(secrets)
        self._secret_bytes = tuple(secret.encode("utf-8") for secret in self._secrets)

    @classmethod
    def from_environment(
        cls, *, allow: Iterable[str] = (), source: Mapping[str, str] | None = None
    ) -> Redactor:
        """A redactor for the secrets `build_env(allow=allow)` withholds from a child."""
        return cls(withheld_values(allow=allow, source=source))

    @property
    def secrets(self) -> tuple[str, ...]:
        """The values being redacted, longest first."""
        return self._secrets

    def redact(self, text: str) -> str:
        """Return `text` with every secret value replaced by [REDACTED]."""
        if not self._secrets:
            return text
        return _redact(text, self._secrets, REDACTED)

    def redact_bytes(self, data: bytes) -> bytes:
        """Return `data` with every secret value (as UTF-8) replaced by [REDACTED]."""
        if not self._secret_bytes:
            return data
        return _redact(data, self._secret_bytes, REDACTED.encode("ascii"))

    def __repr__(self) -> str:
        # Never show the values themselves: a repr can end up in a crash log.
        return f"Redactor(<{len(self._secrets)} secrets>)"
