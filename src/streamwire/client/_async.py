"""``AsyncResumableStream``: the resumable reader for ``httpx.AsyncClient`` (the module docstring of
``streamwire.client`` describes its behaviour)."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType
from typing import TypeAlias, TypeVar, Unpack, overload

import anyio
import httpx

from ..errors import StreamTruncatedError
from ..frames import ChunkFrame, RewoundFrame
from ._base import StreamBase, StreamOptions, broke
from ._core import BODY_QUOTE

__all__ = ["AsyncResumableStream"]

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
                body = await _head(response) if self._wants_body(response) else b""
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


async def _head(response: httpx.Response) -> bytes:
    """The start of a refused answer's body (enough to quote; a huge page is not read whole)."""
    head = bytearray()
    async for data in response.aiter_bytes():
        head += data
        if len(head) >= BODY_QUOTE:
            break
    return bytes(head)
