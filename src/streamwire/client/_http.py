"""The client's HTTP rules, one of each: the headers of a stream request and of a bearer token,
which answers are an event stream, what any other answer means (``response_error``) and how long
its ``Retry-After`` asks to wait. Sans-I/O: every reader, the producer, the dispatcher and
``streamwire tail`` call these instead of spelling a header or parsing a status themselves."""

from __future__ import annotations

import datetime
import email.utils
import time
from typing import Final

from ..errors import ResponseStatusError

__all__ = [
    "BODY_QUOTE",
    "MAX_RETRY_AFTER",
    "RETRY_STATUSES",
    "bearer_headers",
    "is_event_stream",
    "parse_retry_after",
    "request_headers",
    "response_error",
]

#: HTTP answers worth another attempt: the server or a proxy is briefly unable to serve (timeout,
#: too early, too many requests, and the 5xx of a restart or an overloaded upstream).
RETRY_STATUSES: Final = frozenset({408, 425, 429, 500, 502, 503, 504})
#: How much of a refused answer's body an error quotes (and so the most a reader reads of it).
BODY_QUOTE: Final = 300
#: The longest wait (seconds) a ``Retry-After`` gets from the client: as long as the default
#: outage cap (``DEFAULT_MAX_ELAPSED``), which a longer wait would outlast anyway. A server asking
#: for more (or a date far ahead, or a clock far off) is asked again after this long.
MAX_RETRY_AFTER: Final = 120.0
#: Digits a delay-seconds value may have; more is "a very long time" (and ``MAX_RETRY_AFTER``).
_MAX_DELAY_DIGITS: Final = 12


def request_headers(last_event_id: str) -> dict[str, str]:
    """The headers of a request for an event stream (re-attaching after ``last_event_id``)."""
    headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
    if last_event_id:
        headers["Last-Event-ID"] = last_event_id
    return headers


def bearer_headers(token: str | None) -> dict[str, str]:
    """``{"Authorization": "Bearer <token>"}``, or no header for None.

    Raises:
        ValueError: ``token`` is empty or not visible ASCII (no spaces or control characters):
            the server's ``bearer_token`` could never match it (the same rule as the server's).
    """
    if token is None:
        return {}
    if not token or not token.isascii() or not token.isprintable() or " " in token:
        raise ValueError("the bearer token must be visible ASCII characters (no spaces or "
                         "control characters), as the server's bearer_token() expects it")
    return {"Authorization": f"Bearer {token}"}


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """The seconds a ``Retry-After`` header asks to wait, or None when there is none or it cannot
    be read. RFC 9110 §10.2.3: "Retry-After = HTTP-date / delay-seconds"; a date in the past is 0
    seconds, and any wait is capped at ``MAX_RETRY_AFTER``. ``now``: the wall clock a date is
    measured from (default ``time.time()``)."""
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # delay-seconds = 1*DIGIT (str.isdigit alone is Unicode)
        seconds = float(value) if len(value) <= _MAX_DELAY_DIGITS else MAX_RETRY_AFTER
    else:
        try:
            when = email.utils.parsedate_to_datetime(value)
            if when.tzinfo is None:  # "-0000" or the asctime form: an HTTP-date is always GMT
                when = when.replace(tzinfo=datetime.UTC)
            seconds = when.timestamp() - (time.time() if now is None else now)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


def is_event_stream(status: int, content_type: str) -> bool:
    """Whether an answer is a stream to read: a 200 ``text/event-stream``."""
    return status == 200 and content_type.split(";")[0].strip().lower() == "text/event-stream"


def response_error(status: int, content_type: str, retry_after: str | None,
                   body: bytes) -> ResponseStatusError | None:
    """None for a 200 ``text/event-stream``; else the typed error for this answer: retryable for
    the statuses in ``RETRY_STATUSES`` (``retry_after`` from its ``Retry-After``), not retryable
    for any other status or for a 200 that is not an event stream."""
    if is_event_stream(status, content_type):
        return None
    text = body[:BODY_QUOTE].decode("utf-8", "replace")
    if status == 200:
        return ResponseStatusError(
            f"this is not an event stream: expected text/event-stream, got "
            f"{content_type or 'no content type'!r}; the body starts {text!r}",
            status_code=status, retryable=False)
    return ResponseStatusError(f"HTTP {status}: {text!r}", status_code=status,
                               retryable=status in RETRY_STATUSES,
                               retry_after=parse_retry_after(retry_after))
