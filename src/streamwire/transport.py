"""The sans-I/O transport layer of the typed streams: the ``SSEWritable`` / ``SSEReadable``
Protocols, the TRD's ``SSE_HEADERS``, an ``AbortController`` / ``AbortSignal`` pair and
``MemoryWritable`` (a complete in-memory transport for tests and for building a body ahead of time).

The adapters to real I/O live with the edges that own their library:
``streamwire.server.create_sse_writable`` (an ASGI response for Starlette/FastAPI routes) and
``streamwire.client.create_sse_readable`` (an httpx response or any iterable of byte chunks).

Backpressure (server). ``SSEWritable.write`` is synchronous, like the TRD's ``res.write`` and
``asyncio.StreamWriter.write``: it encodes one frame and queues its bytes. ``await drain()`` then
waits until the queue is at most ``high_water`` bytes. ``StreamWriter`` drains after every frame.
A synchronous ``write`` is also what lets an abort listener (which cannot await) emit its terminal
frame at once.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Final, Protocol, final, runtime_checkable

from .errors import UsageError
from .sse import encode_frame

__all__ = [
    "DEFAULT_HIGH_WATER",
    "DEFAULT_MAX_BUFFER_SIZE",
    "DEFAULT_TIMEOUT",
    "SSE_HEADERS",
    "AbortController",
    "AbortSignal",
    "MemoryWritable",
    "ProducerFailure",
    "SSEMessage",
    "SSEReadable",
    "SSEWritable",
    "SyncSSEReadable",
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
class ProducerFailure:
    """The abort reason ``SSEResponse`` gives when its producer raised (``exception``) or returned
    without a terminal frame (``exception`` is None). ``message`` says which, in words safe to send
    to a client (never the exception's text); a ``StreamWriter`` puts it in its ``error`` frame."""

    __slots__ = ("exception", "message")

    def __init__(self, exception: BaseException | None) -> None:
        self.exception = exception
        self.message = ("the stream's producer failed" if exception is not None
                        else "the stream's producer returned without ending it")

    def __repr__(self) -> str:
        return f"ProducerFailure({self.exception!r})"


@final
class AbortController:
    """Owns an ``AbortSignal``; ``abort(reason)`` aborts it once (later calls do nothing)."""

    __slots__ = ("signal",)

    def __init__(self) -> None:
        self.signal: Final = AbortSignal()

    def abort(self, reason: object = None) -> None:
        """Abort the signal with ``reason`` and run its listeners; a no-op if already aborted."""
        self.signal._abort(reason)  # pyright: ignore[reportPrivateUsage]


# -- in memory --------------------------------------------------------------------------------------


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
