"""backends.rate_limits: what each backend says on a rate limit, a quota or an overload, and
until when its loops pause. One row per real sample (the CLI's own words, from
../shared/reference/real-clis.md and the CLIs' issue trackers)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from loopctl.backends.base import AgentResult, AgentStatus
from loopctl.backends.rate_limits import (
    BACKOFF_CAP_S,
    BACKOFF_S,
    LimitKind,
    backoff_s,
    detect,
)

NOW = datetime(2026, 12, 5, 12, 0, 0, tzinfo=UTC)  # 13:00 in Europe/Berlin, 20:00 in Shanghai


def result(
    text: str = "",
    *,
    status: AgentStatus = AgentStatus.ERROR,
    tail: str = "",
    **extra: Any,
) -> AgentResult:
    return AgentResult(status, 1, 1.0, text=text, output_tail=tail, extra=extra)


def claude_json(text: str, api_error_status: int | None = None) -> AgentResult:
    """What the claude backend makes of `claude -p --output-format json` ending in error."""
    line = json.dumps(
        {
            "type": "result",
            "subtype": "success",
            "is_error": True,
            "api_error_status": api_error_status,
            "result": text,
        }
    )
    extra: dict[str, Any] = {"error": text}
    if api_error_status is not None:
        extra["api_error_status"] = api_error_status
    return result(text, tail=line, **extra)


STATED = [
    # Claude Code: the subscription's limit, with its reset in the named zone.
    (
        "claude",
        claude_json("You've hit your limit · resets 1pm (Europe/Lisbon)"),
        LimitKind.QUOTA,
        datetime(2026, 12, 5, 13, 0, tzinfo=UTC),  # Lisbon is on UTC in December
    ),
    (
        "claude",
        claude_json("You've hit your session limit · resets 5:10pm (Europe/Paris)"),
        LimitKind.QUOTA,
        datetime(2026, 12, 5, 16, 10, tzinfo=UTC),
    ),
    (
        "claude",
        claude_json("You've hit your limit · resets 3:20pm (Asia/Shanghai)"),
        LimitKind.QUOTA,
        datetime(2026, 12, 6, 7, 20, tzinfo=UTC),  # 15:20 today in Shanghai has passed
    ),
    # Claude Code 1.0.x printed the reset as an epoch.
    (
        "claude",
        claude_json(f"Claude AI usage limit reached|{int(NOW.timestamp()) + 3600}"),
        LimitKind.QUOTA,
        NOW + timedelta(hours=1),
    ),
    # Codex: the plan's limit, as a span and as a date.
    (
        "codex",
        result(
            "You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing)"
            " or try again in 5 days 22 hours 11\nminutes."
        ),
        LimitKind.QUOTA,
        NOW + timedelta(days=5, hours=22, minutes=11),
    ),
    # OpenAI's 429 body, as litellm (aider) and opencode pass it on.
    (
        "aider",
        result(
            "litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached for"
            " gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Used 29000,"
            " Requested 1500. Please try again in 1.5s.",
        ),
        LimitKind.RATE_LIMIT,
        NOW + timedelta(seconds=1.5),
    ),
    (
        "codex",
        result('{"error":{"type":"usage_limit_reached","resets_in_seconds":602705}}'),
        LimitKind.QUOTA,
        NOW + timedelta(seconds=602705),
    ),
    # loopctl's own agent: the API's status and Retry-After.
    (
        "anthropic",
        result("API error: 429", http_status=429, retry_after_s=2.0),
        LimitKind.RATE_LIMIT,
        NOW + timedelta(seconds=2),
    ),
    (
        "anthropic",
        result(
            'API error: http://x/v1/messages answered 529: {"type":"overloaded_error"}',
            http_status=529,
            retry_after_s=30,
        ),
        LimitKind.OVERLOAD,
        NOW + timedelta(seconds=30),
    ),
]


@pytest.mark.parametrize(("backend", "turn", "kind", "until"), STATED)
def test_a_stated_reset_is_the_pause(
    backend: str, turn: AgentResult, kind: LimitKind, until: datetime
) -> None:
    limit = detect(turn, backend, NOW)

    assert limit is not None
    assert (limit.backend, limit.kind, limit.stated) == (backend, kind, True)
    assert limit.until == until
    assert limit.said
    assert "\n" not in limit.said


UNSTATED = [
    # Claude Code after its own retries (real-clis.md §1).
    (
        claude_json("API Error: Request rejected (429) · injected failure 429", 429),
        LimitKind.RATE_LIMIT,
    ),
    (
        claude_json(
            'API Error: 529 {"type":"error","error":{"type":"overloaded_error",'
            '"message":"Overloaded"}}',
            529,
        ),
        LimitKind.OVERLOAD,
    ),
    # Codex's stream error once its retries ran out.
    (
        result(
            "",
            tail='{"type":"error","message":"exceeded retry limit, last status: 429 Too Many'
            ' Requests"}',
        ),
        LimitKind.RATE_LIMIT,
    ),
    # opencode's error event.
    (
        result(
            "",
            tail='{"type":"error","error":{"name":"APIError","data":{"message":"rate limited",'
            '"statusCode":429,"isRetryable":true}}}',
        ),
        LimitKind.RATE_LIMIT,
    ),
    (
        result("litellm.InternalServerError: AnthropicException - Overloaded"),
        LimitKind.OVERLOAD,
    ),
    (result("You exceeded your current quota, please check your plan"), LimitKind.QUOTA),
    (result("API error: x answered 429", http_status=429), LimitKind.RATE_LIMIT),
]


@pytest.mark.parametrize(("turn", "kind"), UNSTATED)
def test_no_stated_reset_backs_off(turn: AgentResult, kind: LimitKind) -> None:
    limit = detect(turn, "b", NOW)

    assert limit is not None
    assert limit.kind is kind
    assert not limit.stated
    assert limit.until == NOW + timedelta(seconds=BACKOFF_S)


@pytest.mark.parametrize(
    "turn",
    [
        result("Fixed add().", status=AgentStatus.OK),
        # A turn that ended well may talk about rate limits: it was the work, not the backend.
        result("I added a rate limit of 429 requests per minute.", status=AgentStatus.OK),
        claude_json("Not logged in · Please run /login"),
        claude_json("Failed to authenticate. API Error: 401 injected failure 401", 401),
        result("", status=AgentStatus.TIMEOUT, tail="still thinking"),
        result("the check failed: 3 tests", tail="resets at 3pm"),
        # A failed program's own output: a compiler and a test run, not the backend.
        result("", tail="error: call of overloaded 'add(int, int)' is ambiguous"),
        result("", tail="FAILED tests/test_api.py::test_rate_limit_exceeded_returns_429_body"),
        # aider retried past a 429 by itself: the model answered after it.
        result(
            "litellm.RateLimitError: RateLimitError: OpenAIException - rate limited\n"
            "Retrying in 0.2 seconds...\nFixed add().\n"
            "Tokens: 2.4k sent, 30 received. Cost: $0.0077 message, $0.0077 session."
        ),
    ],
)
def test_other_endings_are_not_limits(turn: AgentResult) -> None:
    assert detect(turn, "b", NOW) is None


def test_the_backoff_doubles_per_pause_and_is_capped() -> None:
    assert [backoff_s(n) for n in range(4)] == [60.0, 120.0, 240.0, 480.0]
    assert backoff_s(50) == BACKOFF_CAP_S
    limit = detect(claude_json("API Error: 429", 429), "claude", NOW, streak=2)
    assert limit is not None
    assert limit.until == NOW + timedelta(seconds=240)


def test_a_reset_weeks_away_is_not_believed() -> None:
    limit = detect(result("rate limited", http_status=429, retry_after_s=1e9), "b", NOW)

    assert limit is not None
    assert not limit.stated
    assert limit.until == NOW + timedelta(seconds=BACKOFF_S)
