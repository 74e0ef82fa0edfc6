"""The resumable client: read a wire v2 stream over httpx, every chunk exactly once, in order.

::

    async with AsyncResumableStream(client, url) as stream:     # client: httpx.AsyncClient
        async for chunk in stream:                               # ChunkFrame, or decode(chunk)
            ...
    stream.end_frame.status                                      # "completed", "paused", ...

    with ResumableStream(client, url) as stream:                 # client: httpx.Client
        for chunk in stream: ...

A drop (the body ends with no terminal frame: an eviction or a crash), a network error, a silent
connection (no byte, not even a heartbeat, for ``idle_timeout`` seconds), a malformed frame, a
retryable HTTP status or a ``fail`` with ``recoverable: true`` re-attaches from the cursor with
``Last-Event-ID`` after a backoff (``RetryPolicy``); chunks are deduplicated by sequence. The
stream ends on ``end`` (``end_frame`` holds it), raises ``StreamFailedError`` on a final ``fail``,
``StreamTruncatedError`` (with ``.floor``) on ``truncated`` unless ``on_truncated(floor)`` returns
the sequence a refetched snapshot covers, and ``RetriesExhaustedError`` when a cap is reached.

Typed chunks: ``decode=`` turns each ``ChunkFrame`` into what is yielded, e.g.
``decode=ChunkCodec(Chat).decode`` yields the contract's ``Message`` (None for an event the
contract does not declare); narrow it with ``is_event(msg, Chat.chunk)``.

``rewound`` markers go to ``on_rewound(frame)`` in stream order: a cleanup removed the chunks of
steps after ``frame.at_step``. Chunks above ``frame.min_sequence`` not yet handed out are dropped
(the seed's "a reader prunes its buffer"); those the caller already has are its to undo. A reader
still behind ``frame.at_sequence`` once the survivors are drained gets ``StreamTruncatedError``
(handled like ``truncated``: ``on_truncated`` or raise); a terminal frame pre-empts it.

An abort by the caller ends quietly: leaving the ``with`` block, ``close()``/``aclose()`` (also
from another task or thread) or cancelling the task; none of them is a drop.
"""

from __future__ import annotations

import contextlib
import inspect
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from types import TracebackType
from typing import Generic, TypeAlias, TypedDict, TypeVar, Unpack, overload

import anyio
import httpx

from ._client_core import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    ClientSession,
    ClientStats,
    RetryPolicy,
)
from .errors import StreamTruncatedError, StreamwireError, UsageError
from .frames import ChunkFrame, EndFrame, RewoundFrame
from .sse import DEFAULT_MAX_EVENT_SIZE, DEFAULT_MAX_LINE_SIZE

__all__ = [
    "AsyncResumableStream",
    "ClientStats",
    "ResumableStream",
    "RetryPolicy",
    "StreamOptions",
]

T = TypeVar("T")
R = TypeVar("R")
A = TypeVar("A")

#: A hook the async stream calls with one argument and awaits if it returns an awaitable.
_AsyncHook: TypeAlias = Callable[[A], Awaitable[R] | R]


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


class _Base(Generic[T]):
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
        self._response: httpx.Response | None = None
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

    def _accept(self, response: httpx.Response, body: bytes) -> bool:
        """Whether ``response`` is a stream to read (else its error is queued)."""
        return self._session.check_response(response.status_code,
                                            response.headers.get("content-type", ""),
                                            response.headers.get("retry-after"), body)

    def _failed(self, error: StreamwireError) -> bool:
        """After a connection failed: True when the truncated hook must run, else the backoff
        delay is set (or the final error raised)."""
        if isinstance(error, StreamTruncatedError) and self._has_truncated_hook():
            self._session.last_error = error
            return True
        self._delay = self._session.reattach_delay(error, time.monotonic())
        if self._on_reattach is not None:
            self._on_reattach(error, self._delay)
        return False

    def _snapshot(self, error: StreamTruncatedError, sequence: int | None) -> None:
        if sequence is None:
            raise error
        self._session.resume_from(sequence)
        self._delay = 0.0

    def _has_truncated_hook(self) -> bool:
        raise NotImplementedError

    def _enter(self) -> None:
        if self._entered:
            raise UsageError("a resumable stream is read once; create a new one to read again")
        self._entered = True


class AsyncResumableStream(_Base[T]):
    """Read a wire v2 stream with ``async with ... as stream: async for chunk in stream``.

    Args:
        client: the ``httpx.AsyncClient`` to use (not closed by the stream).
        url: a URL serving wire v2 (``GET /streams/{id}/sse``).
        decode: turns each chunk into the item yielded (e.g. a contract's message decoder);
            by default the ``ChunkFrame`` itself is yielded.
        on_rewound: called (and awaited if it returns an awaitable) with each ``RewoundFrame``.
        on_truncated: called with the floor on ``truncated`` (awaited likewise); returns the
            sequence a refetched snapshot covers (reading resumes after it) or None to raise
            ``StreamTruncatedError``.
        options: ``StreamOptions`` (cursor, retry, idle_timeout, headers, limits).
    """

    @overload
    def __init__(
        self: AsyncResumableStream[ChunkFrame], client: httpx.AsyncClient, url: str | httpx.URL,
        *, decode: None = None, on_rewound: _AsyncHook[RewoundFrame, object] | None = None,
        on_truncated: _AsyncHook[int, int | None] | None = None,
        **options: Unpack[StreamOptions],
    ) -> None: ...
    @overload
    def __init__(
        self, client: httpx.AsyncClient, url: str | httpx.URL,
        *, decode: Callable[[ChunkFrame], T],
        on_rewound: _AsyncHook[RewoundFrame, object] | None = None,
        on_truncated: _AsyncHook[int, int | None] | None = None,
        **options: Unpack[StreamOptions],
    ) -> None: ...
    def __init__(
        self, client: httpx.AsyncClient, url: str | httpx.URL,
        *, decode: Callable[[ChunkFrame], T] | None = None,
        on_rewound: _AsyncHook[RewoundFrame, object] | None = None,
        on_truncated: _AsyncHook[int, int | None] | None = None,
        **options: Unpack[StreamOptions],
    ) -> None:
        super().__init__(url, decode, options)
        self._client = client
        self._on_rewound = on_rewound
        self._on_truncated = on_truncated
        self._body: AsyncIterator[bytes] | None = None
        self._scope: anyio.CancelScope | None = None

    async def __aenter__(self) -> AsyncResumableStream[T]:
        self._enter()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    def __aiter__(self) -> AsyncResumableStream[T]:
        return self

    def close(self) -> None:
        """Abort the read from anywhere (another task, a callback): iteration ends quietly."""
        self._closed = True
        if self._scope is not None:
            self._scope.cancel()

    async def aclose(self) -> None:
        """Abort the read and release the connection; iteration ends quietly."""
        self.close()
        await self._drop_connection()

    async def _drop_connection(self) -> None:
        response, self._response, self._body = self._response, None, None
        if response is not None:
            with anyio.CancelScope(shield=True):
                await response.aclose()

    def _has_truncated_hook(self) -> bool:
        return self._on_truncated is not None

    async def __anext__(self) -> T:
        session = self._session
        while not self._closed:
            if session.pending:
                item = session.pending.popleft()
                if isinstance(item, ChunkFrame):
                    return self._item(item)
                if self._on_rewound is not None:
                    await _maybe_await(self._on_rewound(item))
                continue
            if session.finished:
                break
            error = session.take_error()
            if error is not None:
                await self._drop_connection()
                if self._failed(error):
                    assert isinstance(error, StreamTruncatedError)
                    assert self._on_truncated is not None
                    self._snapshot(error, await _maybe_await(self._on_truncated(error.floor)))
                continue
            with anyio.CancelScope() as scope:
                self._scope = scope
                if self._closed:
                    scope.cancel()
                await self._step()
            self._scope = None
        await self._drop_connection()
        raise StopAsyncIteration

    async def _step(self) -> None:
        """Open a connection if none is open, else read one piece of its body."""
        session = self._session
        if self._body is None:
            if self._delay > 0:
                await anyio.sleep(self._delay)
                self._delay = 0.0
            try:
                response = await self._client.send(self._request(self._client), stream=True)
                self._response = response
                body = await response.aread() if response.status_code != 200 else b""
            except httpx.TransportError as exc:
                session.transport_failed(exc, "connect failed")
                return
            if self._accept(response, body):
                self._body = response.aiter_bytes()
            return
        try:
            data = await self._body.__anext__()
        except StopAsyncIteration:
            session.end_of_body()
        except httpx.TransportError as exc:
            session.transport_failed(exc, _broke(exc))
        else:
            session.feed(data)


class ResumableStream(_Base[T]):
    """The sync twin of ``AsyncResumableStream`` over an ``httpx.Client``:
    ``with ResumableStream(client, url) as stream: for chunk in stream``. Same arguments; the
    hooks are plain functions. ``close()`` may be called from another thread."""

    @overload
    def __init__(
        self: ResumableStream[ChunkFrame], client: httpx.Client, url: str | httpx.URL,
        *, decode: None = None, on_rewound: Callable[[RewoundFrame], object] | None = None,
        on_truncated: Callable[[int], int | None] | None = None,
        **options: Unpack[StreamOptions],
    ) -> None: ...
    @overload
    def __init__(
        self, client: httpx.Client, url: str | httpx.URL,
        *, decode: Callable[[ChunkFrame], T],
        on_rewound: Callable[[RewoundFrame], object] | None = None,
        on_truncated: Callable[[int], int | None] | None = None,
        **options: Unpack[StreamOptions],
    ) -> None: ...
    def __init__(
        self, client: httpx.Client, url: str | httpx.URL,
        *, decode: Callable[[ChunkFrame], T] | None = None,
        on_rewound: Callable[[RewoundFrame], object] | None = None,
        on_truncated: Callable[[int], int | None] | None = None,
        **options: Unpack[StreamOptions],
    ) -> None:
        super().__init__(url, decode, options)
        self._client = client
        self._on_rewound = on_rewound
        self._on_truncated = on_truncated
        self._body: Iterator[bytes] | None = None
        self._wake = threading.Event()  # close() interrupts a backoff sleep
        self._lock = threading.Lock()

    def __enter__(self) -> ResumableStream[T]:
        self._enter()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __iter__(self) -> ResumableStream[T]:
        return self

    def close(self) -> None:
        """Abort the read and release the connection (any thread); iteration ends quietly."""
        self._closed = True
        self._wake.set()
        self._drop_connection()

    def _drop_connection(self) -> None:
        with self._lock:
            response, self._response, self._body = self._response, None, None
        if response is not None:
            # A read blocked in another thread does not wake when its socket is closed; a
            # shutdown does wake it (with EOF or an error, which the reading thread ignores).
            stream = response.extensions.get("network_stream")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if isinstance(sock, socket.socket):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            response.close()

    def _has_truncated_hook(self) -> bool:
        return self._on_truncated is not None

    def __next__(self) -> T:
        session = self._session
        while not self._closed:
            if session.pending:
                item = session.pending.popleft()
                if isinstance(item, ChunkFrame):
                    return self._item(item)
                if self._on_rewound is not None:
                    self._on_rewound(item)
                continue
            if session.finished:
                break
            error = session.take_error()
            if error is not None:
                self._drop_connection()
                if not self._closed and self._failed(error):
                    assert isinstance(error, StreamTruncatedError)
                    assert self._on_truncated is not None
                    self._snapshot(error, self._on_truncated(error.floor))
                continue
            self._step()
        self._drop_connection()
        raise StopIteration

    def _step(self) -> None:
        """Open a connection if none is open, else read one piece of its body."""
        session = self._session
        body = self._body
        if body is None:
            if self._delay > 0:
                self._wake.wait(self._delay)
                self._delay = 0.0
                if self._closed:
                    return
            try:
                response = self._client.send(self._request(self._client), stream=True)
                with self._lock:
                    self._response = response
                content = response.read() if response.status_code != 200 else b""
            except httpx.TransportError as exc:
                session.transport_failed(exc, "connect failed")
                return
            if self._accept(response, content):
                with self._lock:
                    if self._response is response:  # not closed meanwhile
                        self._body = response.iter_bytes()
            return
        try:
            data = next(body)
        except StopIteration:
            session.end_of_body()
        except httpx.TransportError as exc:
            session.transport_failed(exc, _broke(exc))
        except httpx.StreamClosed:
            if not self._closed:
                raise
        else:
            session.feed(data)


def _broke(exc: httpx.TransportError) -> str:
    if isinstance(exc, httpx.ReadTimeout):
        return "no byte for idle_timeout seconds"
    return "connection broke"


async def _maybe_await(value: Awaitable[R] | R) -> R:
    if inspect.isawaitable(value):
        return await value
    return value
