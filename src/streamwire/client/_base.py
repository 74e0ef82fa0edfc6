"""What the async and sync resumable streams share: their options, the session they drive and
the public properties (the adapter in ``_async.py``, and ``_sync.py`` generated from it, only move
bytes)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final, Generic, TypedDict, TypeVar

import httpx

from ..errors import (
    RetriesExhaustedError,
    StreamFailedError,
    StreamTruncatedError,
    StreamwireError,
    UsageError,
)
from ..frames import ChunkFrame, EndFrame
from ..sse import DEFAULT_MAX_EVENT_SIZE, DEFAULT_MAX_LINE_SIZE
from ._concurrency import read_head
from ._core import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    ClientSession,
    ClientStats,
    RetryPolicy,
    describe,
    is_event_stream,
)

# read_head stays importable from here for ``streamwire tail`` (client/tail.py).
__all__ = ["LOGGER", "StreamBase", "StreamOptions", "broke", "read_head"]

T = TypeVar("T")

#: The client says what it does here: each re-attach (why, from where, in how long, attempt n of
#: m) at INFO for a first attempt and WARNING after, giving up at WARNING, a re-attach that
#: worked at INFO. ``streamwire tail`` prints these lines on stderr.
LOGGER: Final = logging.getLogger("streamwire.client")


class StreamOptions(TypedDict, total=False):
    """The options both streams take (keywords; every one has a default).

    ``cursor``: start after this sequence (0: from the beginning). ``retry``: the re-attach policy.
    ``idle_timeout``: seconds without any byte before the connection counts as dropped (None:
    never; default ``DEFAULT_IDLE_TIMEOUT``). ``connect_timeout``: seconds to get the response
    headers. ``headers``: extra request headers (authorization, say). ``max_line_size``,
    ``max_event_size``: the SSE decoder's limits. ``on_reattach(error, delay)``: called before
    each re-attach with the error that ended the connection and the seconds it will wait (to log
    or show it; a plain function for both streams).
    """

    cursor: int
    retry: RetryPolicy | None
    idle_timeout: float | None
    connect_timeout: float
    headers: dict[str, str] | None
    max_line_size: int
    max_event_size: int
    on_reattach: Callable[[StreamwireError, float], object] | None


class StreamBase(Generic[T]):
    """What the async and sync streams share: options, the session and the public properties."""

    def __init__(self, url: str | httpx.URL, decode: Callable[[ChunkFrame], T] | None,
                 options: StreamOptions) -> None:
        self._url = url
        self._decode = decode
        self._headers = dict(options.get("headers") or {})
        self._timeout = httpx.Timeout(options.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT),
                                      read=options.get("idle_timeout", DEFAULT_IDLE_TIMEOUT))
        self._session: ClientSession[T] = ClientSession(
            options.get("cursor", 0), options.get("retry") or RetryPolicy(),
            max_line_size=options.get("max_line_size", DEFAULT_MAX_LINE_SIZE),
            max_event_size=options.get("max_event_size", DEFAULT_MAX_EVENT_SIZE))
        self._closed = False
        self._entered = False
        self._delay = 0.0
        self._on_reattach = options.get("on_reattach")

    @property
    def cursor(self) -> int:
        """The sequence of the last chunk handed to the caller (the starting cursor before any)."""
        return self._session.handed

    @property
    def end_frame(self) -> EndFrame | None:
        """The ``end`` frame once the stream ended (its ``status``, ``output``, ``usage``)."""
        return self._session.end_frame

    @property
    def stats(self) -> ClientStats:
        """Connections, re-attaches, replayed and duplicate chunks."""
        return self._session.stats

    @property
    def last_error(self) -> BaseException | None:
        """The error that ended the last connection that failed (None if none did)."""
        return self._session.last_error

    def _item(self, chunk: ChunkFrame) -> T:
        self._session.hand_out(chunk)
        if self._decode is None:
            return chunk  # type: ignore[return-value]  # T is ChunkFrame when decode is None
        return self._decode(chunk)

    def _request(self, client: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        return client.build_request("GET", self._url, timeout=self._timeout,
                                    headers={**self._headers, **self._session.begin()})

    @staticmethod
    def _wants_body(response: httpx.Response) -> bool:
        """Whether the answer is refused, so the start of its body goes into the error."""
        return not is_event_stream(response.status_code, response.headers.get("content-type", ""))

    def _accept(self, response: httpx.Response, body: bytes) -> bool:
        """Whether ``response`` is a stream to read (else its error is queued)."""
        session = self._session
        ok = session.check_response(response.status_code, response.headers.get("content-type", ""),
                                    response.headers.get("retry-after"), body)
        if ok and session.stats.connections > 1 and session.last_error is not None:
            LOGGER.info("%s: re-attached at cursor %d", self._where(), session.cursor)
        return ok

    def _failed(self, error: StreamwireError) -> bool:
        """After a connection failed: True when the truncated hook must run, else the backoff
        delay is set (or the final error raised)."""
        session = self._session
        if isinstance(error, StreamTruncatedError) and self._has_truncated_hook():
            session.last_error = error
            return True
        if isinstance(error, StreamFailedError) and error.recoverable and not error.retryable:
            session.last_error = error
            LOGGER.warning("%s: %s; a re-attach at cursor %d returned the same failure with no "
                           "new chunk: it is stored, not re-attaching again", self._where(),
                           describe(error), session.cursor)
            raise error
        try:
            self._delay = session.reattach_delay(error, time.monotonic())
        except RetriesExhaustedError as exc:
            LOGGER.warning("%s: %s", self._where(), exc)
            raise
        backoff = session.backoff
        cursor = f"Last-Event-ID {session.cursor}" if session.cursor else "the start"
        LOGGER.log(logging.INFO if backoff.attempt == 1 else logging.WARNING, "%s: %s",
                   self._where(), backoff.reattach_message(error, self._delay, cursor))
        if self._on_reattach is not None:
            self._on_reattach(error, self._delay)
        return False

    def _where(self) -> str:
        """The stream's URL for a log line (without its query, which may hold a secret)."""
        return str(httpx.URL(self._url).copy_with(query=None))

    def _snapshot(self, error: StreamTruncatedError, sequence: int | None) -> None:
        if sequence is None:
            raise error
        self._session.resume_from(sequence)
        self._delay = 0.0

    def close(self) -> None:
        """Abort the read from anywhere (another task, a callback): iteration ends quietly."""
        self._abort()

    def _abort(self) -> None:
        raise NotImplementedError

    def _has_truncated_hook(self) -> bool:
        raise NotImplementedError

    def _enter(self) -> None:
        if self._entered:
            raise UsageError("a resumable stream is read once; create a new one to read again")
        self._entered = True


def broke(exc: httpx.TransportError) -> str:
    if isinstance(exc, httpx.ReadTimeout):
        return "no byte for idle_timeout seconds"
    return "connection broke"

