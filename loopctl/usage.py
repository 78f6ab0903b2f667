"""Token counts and costs as untrusted numbers: finite, non-negative and bounded.

An agent reports its own usage. `1e999`, `NaN`, a negative count or a 400-digit integer must
neither crash loopctl (`int(inf)` raises, `float(10**400)` overflows) nor, once in the event log,
break every later run that sums it. Parsers clamp what they read; readers of the log clamp again,
so a log written before the parsers did stays readable.
"""

from __future__ import annotations

import math

# Far above any real agent turn, far below what would overflow a float when summed.
MAX_TOKENS = 10**12
MAX_USD = 1_000_000.0


def usage_problem(value: object, ceiling: float = MAX_TOKENS) -> str | None:
    """Why a reported count or cost is not usable as it is, or None when it is (or is absent)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"not a number ({type(value).__name__})"
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if value < 0:
        return "negative"
    if isinstance(value, float) and math.isinf(value):
        return "infinite"
    if value > ceiling:
        return f"over the ceiling of {ceiling:g}"
    return None


def clamp_tokens(value: object) -> int | None:
    """A usable token count: None when unknown (absent, not a number, NaN, negative)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if (isinstance(value, float) and math.isnan(value)) or value < 0:
        return None
    if value >= MAX_TOKENS:
        return MAX_TOKENS
    return int(value)


def clamp_usd(value: object) -> float | None:
    """A usable cost in USD: None when unknown (absent, not a number, NaN, negative)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int):
        return float(min(value, int(MAX_USD))) if value >= 0 else None
    if math.isnan(value) or value < 0:
        return None
    return min(value, MAX_USD)


def tokens_of(value: object) -> int:
    """A count read back from the log: 0 for anything unusable."""
    return clamp_tokens(value) or 0


def usd_of(value: object) -> float:
    """A cost read back from the log: 0.0 for anything unusable."""
    return clamp_usd(value) or 0.0
