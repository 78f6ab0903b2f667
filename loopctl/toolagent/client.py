"""One model-API call over httpx, with loopctl's own retries.

httpx retries only failed connections (its transport's `retries`), so 408/409/429/5xx/529 answers
are retried here: `retry-after-ms` / `retry-after` are honoured, otherwise the wait doubles
from `base_s`, and every wait is capped at `cap_s`. The API key only ever travels in the
request headers this module is handed; error messages are redacted before anyone sees them.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

from loopctl.secrets import Redactor

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 5
    base_s: float = 1.0
    cap_s: float = 30.0


class ApiError(Exception):
    """The API call failed for good (after retries, or not retryable)."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        kind: str = "http",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind  # http | network | timeout | malformed | interrupted
        # The wait the server asked for on its last answer (Retry-After, or a rate-limit
        # header's reset): how long the backend's loops pause (backends.rate_limits).
        self.retry_after = retry_after


def uses_environment(url: str) -> bool:
    """Whether httpx may read proxy settings from the environment for `url`.

    A remote API honours HTTPS_PROXY and friends; a server on this machine is always reached
    directly, whatever proxy is configured.
    """

    host = (urlsplit(url).hostname or "").lower()
    return host not in ("localhost", "127.0.0.1", "::1") and not host.startswith("127.")


def retry_after(headers: Any, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait, from retry-after-ms or retry-after."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000.0, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    current = time.time() if now is None else now
    return max(when.timestamp() - current, 0.0)


# Anthropic's per-limit resets (RFC 3339) and OpenAI's ("1s", "6m0s"), read when a 429 states
# no Retry-After: the latest of them is when every exhausted limit has refilled.
_RESET_HEADERS = (
    "anthropic-ratelimit-requests-reset",
    "anthropic-ratelimit-tokens-reset",
    "anthropic-ratelimit-input-tokens-reset",
    "anthropic-ratelimit-output-tokens-reset",
    "x-ratelimit-reset-requests",
    "x-ratelimit-reset-tokens",
)
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def reset_after(headers: Any, now: float | None = None) -> float | None:
    """Seconds until the server says its limits reset: Retry-After, else the rate-limit
    headers' latest reset; None when it says nothing."""
    asked = retry_after(headers, now)
    if asked is not None:
        return asked
    current = time.time() if now is None else now
    found: list[float] = []
    for name in _RESET_HEADERS:
        value = headers.get(name)
        if not value:
            continue
        try:
            found.append(max(datetime.fromisoformat(value).timestamp() - current, 0.0))
            continue
        except ValueError:
            pass
        parts = _DURATION.findall(value)
        if parts and "".join(n + u for n, u in parts) == value.strip():
            scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
            found.append(sum(float(n) * scale[u] for n, u in parts))
    return max(found) if found else None


def backoff(attempt: int, policy: RetryPolicy, asked: float | None) -> float:
    wait = asked if asked is not None else policy.base_s * (2 ** (attempt - 1))
    return min(max(wait, 0.0), policy.cap_s)


@dataclass(slots=True)
class Caller:
    """POSTs JSON to one API, retrying what deserves a retry."""

    client: Any  # httpx.Client
    redactor: Redactor
    error_message: Callable[[object], str | None]
    policy: RetryPolicy = RetryPolicy()
    cancel: threading.Event | None = None
    deadline: float | None = None
    note: Callable[[str], None] | None = None
    retries: int = 0

    def _wait(self, seconds: float) -> None:
        if self.deadline is not None and time.monotonic() + seconds > self.deadline:
            raise ApiError("the agent's time ran out while waiting to retry", kind="timeout")
        waiter = self.cancel or threading.Event()
        if waiter.wait(seconds) and self.cancel is not None:
            raise ApiError("interrupted", kind="interrupted")

    def _say(self, text: str) -> None:
        if self.note is not None:
            self.note(self.redactor.redact(text))

    def post(self, url: str, headers: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        # lazy: httpx is slow to import and only a network call needs it (bench/startup.py)
        import httpx

        attempt = 0
        while True:
            if self.cancel is not None and self.cancel.is_set():
                raise ApiError("interrupted", kind="interrupted")
            attempt += 1
            timeout = 600.0
            if self.deadline is not None:
                timeout = min(timeout, self.deadline - time.monotonic())
                if timeout <= 0:
                    raise ApiError("the agent's time ran out", kind="timeout")
            try:
                response = self.client.post(
                    url,
                    headers=headers,
                    content=json.dumps(body).encode("utf-8"),
                    timeout=httpx.Timeout(timeout, connect=min(10.0, timeout)),
                )
            except httpx.TimeoutException as exc:
                failure = ApiError(
                    f"no answer from {url} in time ({type(exc).__name__})", kind="timeout"
                )
                asked = None
            except httpx.TransportError as exc:
                failure = ApiError(f"cannot reach {url}: {exc}", kind="network")
                asked = None
            else:
                if response.status_code < 300:
                    try:
                        payload = response.json()
                    except ValueError:
                        raise ApiError(
                            f"the API answered {response.status_code} with a body that is not"
                            f" JSON: {self.redactor.redact(response.text[:200])!r}",
                            status=response.status_code,
                            kind="malformed",
                        ) from None
                    if not isinstance(payload, dict):
                        raise ApiError(
                            "the API answered with JSON that is not an object",
                            status=response.status_code,
                            kind="malformed",
                        )
                    return payload
                failure = self._http_error(url, response)
                if response.status_code not in RETRY_STATUSES and response.status_code < 500:
                    raise failure
                asked = reset_after(response.headers)
                failure.retry_after = asked
                if asked is not None and asked > self.policy.cap_s:
                    # A reset further away than any wait inside a turn: the turn ends now and
                    # the backend's loops pause until then instead (backends.rate_limits).
                    raise failure
            if attempt > self.policy.max_retries:
                raise ApiError(
                    f"{failure} (gave up after {attempt} tries)",
                    status=failure.status,
                    kind=failure.kind,
                    retry_after=asked,
                )
            wait = backoff(attempt, self.policy, asked)
            self.retries += 1
            self._say(f"retry {attempt} in {wait:.2f}s after: {failure}")
            self._wait(wait)

    def _http_error(self, url: str, response: Any) -> ApiError:
        try:
            detail = self.error_message(response.json())
        except ValueError:
            detail = None
        if detail is None:
            detail = response.text[:300].strip() or response.reason_phrase
        message = self.redactor.redact(
            f"{url} answered {response.status_code}: {' '.join(str(detail).split())[:300]}"
        )
        return ApiError(message, status=response.status_code)
