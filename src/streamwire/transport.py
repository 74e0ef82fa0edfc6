"""SSE transports for the typed streams: the ``SSEWritable`` / ``SSEReadable`` Protocols, the TRD's
``SSE_HEADERS``, an ``AbortController`` / ``AbortSignal`` pair, and the adapters.

* ``create_sse_writable(produce, ...)`` is the ASGI (Starlette, FastAPI) server side: a route returns
  the ``SSEResponse`` it builds, and the response runs ``produce(writable, signal)`` while it streams
  what ``produce`` writes. A client disconnect aborts the signal with ``"cancelled"`` and a
  server-side ``timeout`` with ``"timeout"``; a ``StreamWriter`` built on that signal answers with the
  matching ``done`` frame.
* ``create_sse_readable(source, ...)`` is the client side: over an ``httpx.Response`` (async or
  sync) or any iterable of byte chunks, it yields ``SSEEvent``s decoded by ``streamwire.sse``.
* ``MemoryWritable`` keeps frames in memory (a complete transport for tests and for building a
  body ahead of time).

Backpressure (server). ``SSEWritable.write`` is synchronous, like the TRD's ``res.write`` and
``asyncio.StreamWriter.write``: it encodes one frame and queues its bytes. ``await drain()`` then
waits until the queue is at most ``high_water`` bytes, which happens as the response task hands
bytes to the ASGI ``send``; ``send`` itself waits while the server's socket buffer is full
(uvicorn's flow control), so a slow client slows the producer down instead of growing memory.
``StreamWriter`` drains after every frame. A producer that writes without draining is stopped at
``max_buffer_size`` with a ``UsageError``. A synchronous ``write`` is also what lets an abort
listener (which cannot await) emit its terminal frame at once.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Iterable,
    Iterator,
    Mapping,
)
from types import MappingProxyType
from typing import Any, Final, Protocol, cast, final, runtime_checkable

import anyio
import httpx
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from .errors import StreamDropError, UsageError
from .sse import DEFAULT_MAX_EVENT_SIZE, DEFAULT_MAX_LINE_SIZE, SSEDecoder, SSEEvent, encode_frame

__all__ = [
    "DEFAULT_HIGH_WATER",
    "DEFAULT_MAX_BUFFER_SIZE",
    "DEFAULT_TIMEOUT",
    "SSE_HEADERS",
    "ASGIWritable",
    "AbortController",
    "AbortSignal",
    "ByteSource",
    "MemoryWritable",
    "Producer",
    "SSEMessage",
    "SSEReadable",
    "SSEResponse",
    "SSEWritable",
    "SyncSSEReadable",
    "create_sse_readable",
    "create_sse_writable",
]

#: The TRD's four response headers (``Connection`` is hop-by-hop: HTTP/2 servers drop it).
SSE_HEADERS: Final[Mapping[str, str]] = MappingProxyType({
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "Connection": "keep-alive",
    "X-Accel-Buffering": "no",
})
#: Bytes queued before ``drain()`` waits: asyncio's own transport high-water mark (64 KiB), a few
#: hundred token events, so a fast client never waits while a stalled one holds little memory.
DEFAULT_HIGH_WATER: Final = 64 * 1024
#: Hard cap on queued bytes for a producer that writes without ``drain()``. One frame may exceed
#: it (an attachment as a data URL, 1-10 MB in the TRD), but nothing is queued beyond it.
DEFAULT_MAX_BUFFER_SIZE: Final = 32 * 1024 * 1024
#: Server-side time limit of one response, in seconds: none. LLM replies take from seconds to many
#: minutes, so only the application knows a sensible bound; pass ``timeout=`` to set one.
DEFAULT_TIMEOUT: Final[float | None] = None


# -- Protocols ------------------------------------------------------------------------------------


class SSEWritable(Protocol):
    """Where a ``StreamWriter`` writes named SSE frames (the TRD's ``SSEWritable``).

    ``write`` and ``end`` never block (an abort listener, which cannot await, must be able to write
    the terminal frame); ``drain`` is where backpressure happens.
    """

    def write(self, event: str, data: str) -> None:
        """Queue one ``event: <event>\\ndata: <data>\\n\\n`` frame."""
        ...

    def end(self) -> None:
        """End the body after the queued frames. Idempotent."""
        ...

    async def drain(self) -> None:
        """Wait until the queued bytes are at or below the high-water mark (or the peer is gone)."""
        ...


class SSEMessage(Protocol):
    """What a readable yields: an event name and its data (``SSEEvent`` and httpx-sse's events)."""

    @property
    def event(self) -> str: ...
    @property
    def data(self) -> str: ...


@runtime_checkable
class SSEReadable(Protocol):
    """An async iterable of SSE events (the TRD's ``SSEReadable``)."""

    def __aiter__(self) -> AsyncIterator[SSEMessage]: ...


@runtime_checkable
class SyncSSEReadable(Protocol):
    """A plain iterable of SSE events, for ``StreamReader.consume_sync``."""

    def __iter__(self) -> Iterator[SSEMessage]: ...


# -- abort ------------------------------------------------------------------------------------------


@final
class AbortSignal:
    """Tells a writer that its stream was aborted, and why (the DOM's ``AbortSignal``, sans-I/O).

    Obtain one from an ``AbortController``. Listeners are plain callables run synchronously, once,
    in registration order, by ``AbortController.abort``; a listener's exception propagates out of
    ``abort``. Abort from the thread that runs the stream's event loop (from another thread, use
    ``anyio.from_thread.run_sync(controller.abort, reason)``): listeners write to the transport.
    """

    __slots__ = ("_aborted", "_listeners", "_reason")

    def __init__(self) -> None:
        self._aborted = False
        self._reason: object = None
        self._listeners: list[Callable[[], object]] = []

    @property
    def aborted(self) -> bool:
        """True once the controller aborted."""
        return self._aborted

    @property
    def reason(self) -> object:
        """The value given to ``abort`` (None before, or when none was given)."""
        return self._reason

    def add_listener(self, listener: Callable[[], object]) -> None:
        """Run ``listener()`` on abort. On an already aborted signal it never runs: check
        ``aborted`` first (as the DOM's ``addEventListener`` does)."""
        if not self._aborted:
            self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[], object]) -> None:
        """Forget ``listener``; no error if it is not registered."""
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def _abort(self, reason: object) -> None:
        if self._aborted:
            return
        self._aborted = True
        self._reason = reason
        listeners, self._listeners = self._listeners, []
        for listener in listeners:
            listener()


@final
class AbortController:
    """Owns an ``AbortSignal``; ``abort(reason)`` aborts it once (later calls do nothing)."""

    __slots__ = ("signal",)

    def __init__(self) -> None:
        self.signal: Final = AbortSignal()

    def abort(self, reason: object = None) -> None:
        """Abort the signal with ``reason`` and run its listeners; a no-op if already aborted."""
        self.signal._abort(reason)  # pyright: ignore[reportPrivateUsage]


# -- server side ------------------------------------------------------------------------------------


@final
class MemoryWritable:
    """An ``SSEWritable`` that keeps everything in memory: ``frames`` (event, data) and ``body``."""

    __slots__ = ("body", "ended", "frames")

    def __init__(self) -> None:
        self.frames: list[tuple[str, str]] = []
        self.body = bytearray()
        self.ended = False

    def write(self, event: str, data: str) -> None:
        """Record one frame. Raises ``UsageError`` after ``end()``."""
        if self.ended:
            raise UsageError(f"MemoryWritable.write({event!r}) after end()")
        self.body += encode_frame(data, event=event)
        self.frames.append((event, data))

    def end(self) -> None:
        """Mark the body complete."""
        self.ended = True

    async def drain(self) -> None:
        """Nothing to wait for: memory takes everything."""


@final
class ASGIWritable:
    """The ``SSEWritable`` of one ``SSEResponse``: a byte queue drained by the response task.

    ``buffered`` is the number of bytes queued now, ``peak_buffered`` the most ever queued;
    ``ended`` and ``disconnected`` say how the body finished.
    """

    __slots__ = (
        "_data_ready",
        "_drained",
        "_flushed",
        "_high_water",
        "_max_buffer",
        "_queue",
        "buffered",
        "disconnected",
        "ended",
        "peak_buffered",
    )

    def __init__(self, high_water: int, max_buffer: int) -> None:
        self._high_water = high_water
        self._max_buffer = max_buffer
        self._queue: deque[bytes] = deque()
        self.buffered = 0
        self.peak_buffered = 0
        self.ended = False
        self.disconnected = False
        # Created inside the response task (anyio needs a running event loop).
        self._data_ready = anyio.Event()
        self._drained = anyio.Event()
        self._flushed = anyio.Event()

    def write(self, event: str, data: str) -> None:
        if self.disconnected:
            return  # nobody to send to; the signal already said "cancelled"
        if self.ended:
            raise UsageError(f"SSEWritable.write({event!r}) after end()")
        if self.buffered > self._max_buffer:
            raise UsageError(
                f"{self.buffered} bytes are queued for a slow client, over "
                f"max_buffer_size={self._max_buffer}; await writable.drain() after each write "
                "(StreamWriter does), or pass a larger max_buffer_size to create_sse_writable")
        frame = encode_frame(data, event=event)
        self._queue.append(frame)
        self.buffered += len(frame)
        self.peak_buffered = max(self.peak_buffered, self.buffered)
        self._data_ready.set()

    def end(self) -> None:
        self.ended = True
        self._data_ready.set()

    async def drain(self) -> None:
        while self.buffered > self._high_water and not self.disconnected:
            if self._drained.is_set():
                self._drained = anyio.Event()
            await self._drained.wait()

    def _disconnect(self) -> None:
        self.disconnected = True
        self._queue.clear()
        self.buffered = 0
        self._drained.set()
        self._data_ready.set()
        self._flushed.set()

    async def _pump(self, send: Send) -> None:
        """Move queued bytes to ``send`` until the body ends (or the client leaves)."""
        queue = self._queue
        try:
            while not self.disconnected:
                if not queue:
                    if self.ended:
                        await send({"type": "http.response.body", "body": b"", "more_body": False})
                        break
                    self._data_ready = anyio.Event()
                    await self._data_ready.wait()
                    continue
                chunk = queue.popleft() if len(queue) == 1 else b"".join(queue)
                queue.clear()
                size = len(chunk)
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                self.buffered -= size
                if self.buffered <= self._high_water:
                    self._drained.set()
        except OSError:
            # ASGI >= 2.4 servers raise OSError from send() once the client is gone.
            self._disconnect()
        finally:
            self._flushed.set()


#: What ``create_sse_writable`` runs: it writes into the writable and watches the signal.
Producer = Callable[[SSEWritable, AbortSignal], Awaitable[None]]


class SSEResponse(Response):
    """An ASGI response (return it from a Starlette or FastAPI route) that sends ``SSE_HEADERS``
    and streams what ``produce(writable, signal)`` writes (``create_sse_writable`` in the TRD)::

        async def produce(writable: SSEWritable, signal: AbortSignal) -> None:
            writer = StreamWriter(writable, Chat, signal=signal)
            await writer.event(Chat.chunk({"chunk": "hi"}))
            await writer.end("complete", message_id, user_message_id)

        @app.post("/chat")
        async def chat() -> SSEResponse:
            return create_sse_writable(produce, timeout=120)

    ``produce`` runs in the response's task. When the client disconnects, the signal aborts with
    ``"cancelled"`` and ``produce`` is cancelled; after ``timeout`` seconds (if the stream has not
    ended) it aborts with ``"timeout"`` and ``produce`` is cancelled. If ``produce`` raises, or
    returns before a terminal frame, the signal aborts with the exception (or a note), the body
    ends, and the exception is re-raised to the server. ``headers`` are added to ``SSE_HEADERS``.
    See the module docstring for ``high_water`` and ``max_buffer_size``.

    After the response finished, ``writable`` is the transport the producer wrote to (its
    ``buffered``, ``peak_buffered``, ``ended`` and ``disconnected`` attributes report what happened)
    and ``signal`` the signal it was given.
    """

    media_type = "text/event-stream"

    def __init__(
        self,
        produce: Producer,
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        high_water: int = DEFAULT_HIGH_WATER,
        max_buffer_size: int = DEFAULT_MAX_BUFFER_SIZE,
        status_code: int = 200,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if high_water < 0 or max_buffer_size < high_water:
            raise ValueError("need 0 <= high_water <= max_buffer_size")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be positive or None, got {timeout!r}")
        self._produce = produce
        self._timeout = timeout
        self._high_water = high_water
        self._max_buffer = max_buffer_size
        self._controller = AbortController()
        self._used = False
        self.signal = self._controller.signal
        self.writable: ASGIWritable | None = None
        self.status_code = status_code
        self.background = None
        self.init_headers({**SSE_HEADERS, **(headers or {})})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._used:
            raise UsageError("an SSEResponse streams once; build one per request")
        self._used = True
        writable = self.writable = ASGIWritable(self._high_water, self._max_buffer)
        controller = self._controller
        failure: Exception | None = None
        try:
            await send({"type": "http.response.start", "status": self.status_code,
                        "headers": self.raw_headers})
        except OSError:
            # The client left before the response started: nothing to stream, nobody to tell.
            writable.disconnected = True
            controller.abort("cancelled")
            return
        async with anyio.create_task_group() as tg:
            with anyio.CancelScope() as producer_scope:
                tg.start_soon(writable._pump, send)  # pyright: ignore[reportPrivateUsage]
                tg.start_soon(self._watch_disconnect, receive, writable, producer_scope)
                if self._timeout is not None:
                    tg.start_soon(self._deadline, self._timeout, writable, producer_scope)
                try:
                    await self._produce(writable, controller.signal)
                except Exception as exc:
                    failure = exc
            if not writable.disconnected and not writable.ended:
                # The producer raised, or returned without a terminal frame: a writer on the
                # signal answers error("Stream aborted unexpectedly"); then the body ends.
                controller.abort(failure if failure is not None else "producer returned")
            writable.end()
            await writable._flushed.wait()  # pyright: ignore[reportPrivateUsage]
            tg.cancel_scope.cancel()
        if failure is not None:
            raise failure

    async def _watch_disconnect(self, receive: Receive, writable: ASGIWritable,
                                producer: anyio.CancelScope) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
        if writable.ended and not writable.buffered:
            return  # the whole body was handed to the server; nothing was cut short
        writable._disconnect()  # pyright: ignore[reportPrivateUsage]
        self._controller.abort("cancelled")
        producer.cancel()

    async def _deadline(self, seconds: float, writable: ASGIWritable,
                        producer: anyio.CancelScope) -> None:
        await anyio.sleep(seconds)
        if not writable.ended:
            self._controller.abort("timeout")
            producer.cancel()


#: The TRD's factory name: ``create_sse_writable(produce, ...)`` is ``SSEResponse(produce, ...)``.
create_sse_writable: Final = SSEResponse


# -- client side ------------------------------------------------------------------------------------

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
                for chunk in chunks:
                    yield from decoder.feed(chunk)
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
            if response is not None:
                response.close()


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

    Events are dispatched the WHATWG way: an event without its closing blank line at end of body
    is dropped. The body (the response, or the source iterator's ``aclose``/``close``) is released
    when iteration ends, breaks off or fails; an ``httpx.TransportError`` mid-body becomes
    ``StreamDropError``; the size limits go to ``SSEDecoder`` (``SSEDecodeError`` names the one
    to raise).
    """
    return _BodyReadable(source, max_line_size, max_event_size)
