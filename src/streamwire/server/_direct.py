"""``create_sse_writable`` for ASGI (Starlette, FastAPI): the direct profile's server transport.

A route returns the ``SSEResponse`` it builds, and the response runs ``produce(writable, signal)``
while it streams what ``produce`` writes. A client disconnect aborts the signal with
``"cancelled"`` and a server-side ``timeout`` with ``"timeout"``; a ``StreamWriter`` built on that
signal answers with the matching ``done`` frame.

Backpressure: ``await drain()`` waits until the queue is at most ``high_water`` bytes, which
happens as the response task hands bytes to the ASGI ``send``; ``send`` itself waits while the
server's socket buffer is full (uvicorn's flow control), so a slow client slows the producer down
instead of growing memory. A producer that writes without draining is stopped at
``max_buffer_size`` with a ``UsageError``.

Heartbeats: a ``: heartbeat`` comment goes out when nothing was sent for ``heartbeat`` seconds
(15 by default, like sse-starlette's ping and ``create_app``), so proxies that cut quiet responses
after 30-60 s keep the stream open while a model thinks; ``heartbeat=None`` turns them off.

The response runs on the connection engine (``_engine``) like every stream of a ``StreamApp``: a
client whose window stays full for ``send_timeout`` is evicted (the signal aborts ``"cancelled"``)
and its connection reset. Pass ``engine=stream_app.engine`` (and a ``stream_id``) and it also
counts against that app's caps (503 / 429 with ``Retry-After`` before the producer runs) and is
drained with its streams (the signal aborts ``"shutdown"``: a ``StreamWriter`` sends ``error``);
without one it has an engine of its own with the default settings and no signal handling.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Final, final

import anyio
import anyio.abc
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from ..errors import UsageError
from ..sse import encode_frame
from ..transport import (
    DEFAULT_HIGH_WATER,
    DEFAULT_MAX_BUFFER_SIZE,
    DEFAULT_TIMEOUT,
    SSE_HEADERS,
    AbortController,
    AbortSignal,
    ProducerFailure,
    SSEWritable,
)
from ._defaults import DEFAULT_HEARTBEAT_INTERVAL
from ._engine import Connection, Engine
from ._http import refusal_for, send_error
from ._settings import ServerSettings

logger = logging.getLogger("streamwire.server")

#: The engine of a response given none: the default limits, no signal handling of its own.
_STANDALONE: Final = ServerSettings(drain_on_signal=False)

__all__ = ["ASGIWritable", "Producer", "SSEResponse", "create_sse_writable"]


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
        "last_sent",
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
        #: ``anyio.current_time()`` of the last bytes handed to the server (or of the start).
        self.last_sent = anyio.current_time()
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

    async def _pump(self, conn: Connection) -> None:
        """Move queued bytes to the connection until the body ends (or the client leaves)."""
        queue = self._queue
        try:
            while not self.disconnected:
                if not queue:
                    if self.ended:
                        await conn.end()
                        break
                    self._data_ready = anyio.Event()
                    await self._data_ready.wait()
                    continue
                chunk = queue.popleft() if len(queue) == 1 else b"".join(queue)
                queue.clear()
                size = len(chunk)
                await conn.write(chunk)
                self.last_sent = anyio.current_time()
                self.buffered -= size
                if self.buffered <= self._high_water:
                    self._drained.set()
        except OSError:
            # ASGI >= 2.4 servers raise OSError from send() once the client is gone.
            self._disconnect()
        finally:
            self._flushed.set()

    def _take(self) -> bytes:
        """What is queued, taken out (a shutdown's last words)."""
        data = b"".join(self._queue)
        self._queue.clear()
        self.buffered = 0
        return data


#: What ``create_sse_writable`` runs: it writes into the writable and watches the signal.
Producer = Callable[[SSEWritable, AbortSignal], Awaitable[None]]


class SSEResponse(StreamingResponse):
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
    returns before a terminal frame, the cause is logged (logger ``streamwire.server``, with the
    exception), the signal aborts with a ``ProducerFailure`` (a ``StreamWriter`` on it sends an
    ``error`` frame saying which of the two happened, without the exception's text), the body ends,
    and the exception is re-raised to the server. ``headers`` are added to ``SSE_HEADERS``.
    ``heartbeat`` is the quiet time in seconds before a ``: heartbeat`` comment (None: none). See
    the module docstring for ``high_water`` and ``max_buffer_size``, and for ``engine`` and
    ``stream_id`` (the caps, ``send_timeout`` and drain of a ``StreamApp``).

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
        heartbeat: float | None = DEFAULT_HEARTBEAT_INTERVAL,
        high_water: int = DEFAULT_HIGH_WATER,
        max_buffer_size: int = DEFAULT_MAX_BUFFER_SIZE,
        status_code: int = 200,
        headers: Mapping[str, str] | None = None,
        engine: Engine | None = None,
        stream_id: str = "",
    ) -> None:
        if high_water < 0 or max_buffer_size < high_water:
            raise ValueError("need 0 <= high_water <= max_buffer_size")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be positive or None, got {timeout!r}")
        if heartbeat is not None and not heartbeat > 0:
            raise ValueError(f"heartbeat must be > 0 seconds, or None to turn it off; "
                             f"got {heartbeat!r}")
        # Starlette's public constructor builds the headers; the body is ours (``__call__``).
        super().__init__(_NO_BODY, status_code, {**SSE_HEADERS, **(headers or {})})
        self._produce = produce
        self._timeout = timeout
        self._heartbeat = heartbeat
        self._high_water = high_water
        self._max_buffer = max_buffer_size
        self._engine = engine
        self._stream_id = stream_id
        self._controller = AbortController()
        self._used = False
        self.signal = self._controller.signal
        self.writable: ASGIWritable | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._used:
            raise UsageError("an SSEResponse streams once; build one per request")
        self._used = True
        engine = self._engine if self._engine is not None else Engine(_STANDALONE)
        try:
            conn = engine.admit(self._stream_id, scope)
        except Exception as exc:  # a cap: the producer never runs
            refusal = refusal_for(exc, expose_errors=engine.settings.expose_errors,
                                  retry_after=engine.retry_after)
            engine.refused += 1
            await send_error(send, refusal, [])
            return
        writable = self.writable = ASGIWritable(self._high_water, self._max_buffer)
        source = _ProducerSource(self._produce, writable, self._controller, self._timeout, scope)
        conn.on_stop = source.stopped
        await engine.serve(conn, source, send, receive, status=self.status_code,
                           headers=self.headers.raw, heartbeat=self._heartbeat)
        if source.failure is not None:
            raise source.failure


class _NoBody:
    """The body iterator Starlette's constructor wants; never read (``SSEResponse.__call__``)."""

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        raise StopAsyncIteration


_NO_BODY: Final = _NoBody()


class _ProducerSource:
    """An ``SSEResponse``'s producer and its queue, as an ``_engine.Source``: the producer runs in
    the handler's task, the queue's writer and the deadline in the connection's task group."""

    eager = False

    def __init__(self, produce: Producer, writable: ASGIWritable, controller: AbortController,
                 timeout: float | None, scope: Scope) -> None:
        self.produce = produce
        self.writable = writable
        self.controller = controller
        self.timeout = timeout
        self.scope = scope
        self.failure: Exception | None = None

    def stopped(self, conn: Connection) -> None:
        """The engine ends the connection: tell the producer why, before it is cancelled."""
        if conn.outcome == "shutdown":
            self.controller.abort("shutdown")  # a StreamWriter writes its error frame now
            return
        self.writable._disconnect()  # pyright: ignore[reportPrivateUsage]
        self.controller.abort("cancelled")

    async def pump(self, conn: Connection, tg: anyio.abc.TaskGroup | None) -> None:
        assert tg is not None
        writable, controller = self.writable, self.controller
        tg.start_soon(writable._pump, conn)  # pyright: ignore[reportPrivateUsage]
        with anyio.CancelScope() as producer_scope:
            if self.timeout is not None:
                tg.start_soon(_deadline, self.timeout, writable, controller, producer_scope)
            try:
                await self.produce(writable, controller.signal)
            except Exception as exc:
                self.failure = exc
        if not writable.disconnected and not writable.ended:
            # The producer raised, or returned without a terminal frame: say so in the log, and
            # a writer on the signal tells the client which (not the exception's text).
            _log_failure(self.scope, self.failure)
            controller.abort(ProducerFailure(self.failure))
        writable.end()
        await writable._flushed.wait()  # pyright: ignore[reportPrivateUsage]

    def last_words(self, conn: Connection) -> bytes:
        return self.writable._take()  # pyright: ignore[reportPrivateUsage]

    def holds(self) -> bool:
        return False

    async def aclose(self) -> None:
        return None


async def _deadline(seconds: float, writable: ASGIWritable, controller: AbortController,
                    producer: anyio.CancelScope) -> None:
    await anyio.sleep(seconds)
    if not writable.ended:
        controller.abort("timeout")
        producer.cancel()


def _log_failure(scope: Scope, failure: Exception | None) -> None:
    where = f"{scope.get('method', '')} {scope.get('path', '')}".strip() or "an SSEResponse"
    if failure is not None:
        logger.error("%s: the stream's producer raised %s; the client gets an error event "
                     "(\"the stream's producer failed\")", where, type(failure).__name__,
                     exc_info=failure)
    else:
        logger.error("%s: the stream's producer returned without ending the stream; the client "
                     "gets an error event. End it with writer.end(...) or writer.error(...) (or "
                     "writable.end()) before returning", where)


#: The TRD's factory name: ``create_sse_writable(produce, ...)`` is ``SSEResponse(produce, ...)``.
create_sse_writable: Final = SSEResponse
