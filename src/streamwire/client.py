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

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType
from typing import TypeAlias, TypeVar, Unpack, overload

import anyio
import httpx

from ._client_base import StreamBase, StreamOptions, broke
from ._client_core import (
    DEFAULT_BACKOFF_INITIAL,
    DEFAULT_BACKOFF_MAX,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_ELAPSED,
    ClientStats,
    RetryPolicy,
)
from ._client_sync import ResumableStream
from .errors import StreamTruncatedError
from .frames import ChunkFrame, RewoundFrame

__all__ = [
    "DEFAULT_BACKOFF_INITIAL",
    "DEFAULT_BACKOFF_MAX",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_MAX_ELAPSED",
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


class AsyncResumableStream(StreamBase[T]):
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
            session.transport_failed(exc, broke(exc))
        else:
            session.feed(data)


async def _maybe_await(value: Awaitable[R] | R) -> R:
    if inspect.isawaitable(value):
        return await value
    return value
