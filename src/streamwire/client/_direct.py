"""``create_sse_readable``: the direct profile's client transport, over an httpx response (async or
sync) or any iterable of byte chunks; it yields ``SSEEvent``s decoded by ``streamwire.sse``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterable, AsyncIterator, Generator, Iterable, Iterator
from typing import Any, cast, final

import anyio
import httpx

from ..errors import StreamDropError, UsageError
from ..sse import DEFAULT_MAX_EVENT_SIZE, DEFAULT_MAX_LINE_SIZE, SSEDecoder, SSEEvent
from ._concurrency import aread_head, read_head
from ._http import is_event_stream, response_error

__all__ = ["ByteSource", "create_sse_readable"]

#: What ``create_sse_readable`` reads: an httpx response (streamed, async or sync) or byte chunks.
ByteSource = httpx.Response | AsyncIterable[bytes] | Iterable[bytes]


@final
class _BodyReadable:
    """SSE events decoded from a byte source; iterate it once, with ``async for`` or ``for``."""

    __slots__ = ("_max_event", "_max_line", "_source", "_used")

    def __init__(self, source: ByteSource, max_line_size: int, max_event_size: int) -> None:
        self._source = source
        self._max_line = max_line_size
        self._max_event = max_event_size
        self._used = False

    def _start(self, *, is_async: bool) -> tuple[SSEDecoder, httpx.Response | None]:
        """Check the source fits this kind of iteration; the decoder and the response, if any."""
        if self._used:
            raise UsageError("an SSE readable is iterated once (its body is consumed)")
        source = self._source
        if isinstance(source, httpx.Response):
            stream = source.stream
            fits = (isinstance(stream, httpx.AsyncByteStream) if is_async
                    else isinstance(stream, httpx.SyncByteStream))
            if not fits:
                made_by = "a sync httpx.Client" if is_async else "an httpx.AsyncClient"
                raise UsageError(f"this response comes from {made_by}: iterate the readable with "
                                 f"`{'for' if is_async else 'async for'}`, or use StreamReader."
                                 f"{'consume_sync()' if is_async else 'consume()'}")
        elif not is_async and not isinstance(source, Iterable):
            raise UsageError("this readable wraps an async source: iterate it with `async for`, "
                             "or read it with StreamReader.consume()")
        self._used = True
        decoder = SSEDecoder(max_line_size=self._max_line, max_event_size=self._max_event)
        return decoder, source if isinstance(source, httpx.Response) else None

    async def __aiter__(self) -> AsyncIterator[SSEEvent]:
        decoder, response = self._start(is_async=True)
        source = self._source
        if response is not None:
            chunks: Any = response.aiter_bytes()
        elif isinstance(source, AsyncIterable):
            chunks = aiter(source)
        else:
            chunks = _aiter_sync(cast("Iterable[bytes]", source))
        try:
            with _drop_on_transport_error():
                if response is not None and not _is_event_stream(response):
                    _raise_for(response, await aread_head(response))
                async for chunk in chunks:
                    for event in decoder.feed(chunk):
                        yield event
        finally:
            # Release the body on every exit: normal end, early break (aclose) and errors.
            with anyio.CancelScope(shield=True):
                aclose = getattr(chunks, "aclose", None)
                if aclose is not None:
                    await aclose()
                if response is not None:
                    await response.aclose()

    def __iter__(self) -> Iterator[SSEEvent]:
        decoder, response = self._start(is_async=False)
        chunks: Any = iter(cast("Iterable[bytes]", self._source)) if response is None else (
            response.iter_bytes())
        try:
            with _drop_on_transport_error():
                if response is not None and not _is_event_stream(response):
                    _raise_for(response, read_head(response))
                for chunk in chunks:
                    yield from decoder.feed(chunk)
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
            if response is not None:
                response.close()


def _is_event_stream(response: httpx.Response) -> bool:
    return is_event_stream(response.status_code, response.headers.get("content-type", ""))


def _raise_for(response: httpx.Response, head: bytes) -> None:
    """Raise the refused ``response``'s ``ResponseStatusError``, quoting ``head`` (its start)."""
    error = response_error(response.status_code, response.headers.get("content-type", ""),
                           response.headers.get("retry-after"), head)
    assert error is not None
    raise error


@contextlib.contextmanager
def _drop_on_transport_error() -> Generator[None]:
    # The one place httpx's errors become ours: a body that breaks off mid-stream is a drop.
    try:
        yield
    except httpx.TransportError as exc:
        raise StreamDropError(f"the SSE body broke off: {exc!r}") from exc


async def _aiter_sync(source: Iterable[bytes]) -> AsyncIterator[bytes]:
    # In-memory chunks (a list, a generator over a buffer) read from async code. A blocking
    # iterator (a socket) does not belong here: wrap it in an async one.
    for chunk in source:
        yield chunk


def create_sse_readable(
    source: ByteSource,
    *,
    max_line_size: int = DEFAULT_MAX_LINE_SIZE,
    max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
) -> _BodyReadable:
    """SSE events from ``source``: an ``httpx.Response`` opened with ``stream=True`` / ``.stream()``
    (iterate with ``async for`` on an ``AsyncClient`` response, ``for`` on a ``Client`` one) or an
    iterable (async or not) of byte chunks. The result is both an ``SSEReadable`` and a
    ``SyncSSEReadable``, iterable once; a plain iterable may also be read with ``async for`` (it
    must not block: in-memory chunks), an async one only with ``async for``.

    An httpx response must be an event stream: any other answer (a 404 or 422 JSON error, an HTML
    page) raises ``ResponseStatusError`` when iteration starts, with the status and the start of
    the body (``.status_code``); the rule is the resumable client's (``response_error``).

    Events are dispatched the WHATWG way: an event without its closing blank line at end of body
    is dropped. The body (the response, or the source iterator's ``aclose``/``close``) is released
    when iteration ends, breaks off or fails; an ``httpx.TransportError`` mid-body becomes
    ``StreamDropError``; the size limits go to ``SSEDecoder`` (``SSEDecodeError`` names the one
    to raise).
    """
    return _BodyReadable(source, max_line_size, max_event_size)
