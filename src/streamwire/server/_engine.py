"""The connection engine: every streaming response of a ``StreamApp`` is admitted, run and ended
here, whatever it streams.

Theory of operation (Starlette's ``StreamingResponse`` and uvicorn's ``FlowControl``, as one
object). A streaming route checks its request, then asks ``Engine.admit`` for a slot: the server's
and the stream's caps are checked and the slot taken with no await in between, so a burst of
connects cannot all pass the check (503 past ``max_connections`` or while draining, 429 past
``max_connections_per_stream``, both with ``Retry-After``). ``Engine.serve`` then runs the response
with a *source* -- what it streams: a log reader's frames (``_sse``), a chat reply (``_chat``), a
producer's queue (``_direct``) -- in one task group per connection, never one per event:

* the source's *pump* (the handler's own task) writes through ``Connection.write``, which marks
  the write as pending while ``send`` is awaited;
* the *watchdog* writes a heartbeat comment when nothing was written for ``heartbeat_interval``
  and evicts the consumer when one write has been pending for ``send_timeout``;
* the *listener* awaits ``http.disconnect`` so a client that leaves is noticed at once.

A source may hand its connection over (``Handoff``): a fan-out hub (``_fanout``) then writes to it
with no task of its own, and the connection's task only waits for its client to leave.

Every connection ends in exactly one ``Outcome``: ``done`` (the source's end), ``disconnect`` (the
client left: nothing more is written), ``evicted`` (a reset with no terminal, so a reader
re-attaches from its cursor), ``shutdown`` (the source's last words -- the recoverable ``fail``
frame of a stream -- then the end of the body) or ``error``. An evicted consumer is not sent a
closing write: its window is full, and a close that waits for the buffer to drain would keep its
socket and buffered bytes for as long as it stays. The connection is reset instead
(``_compat.uvicorn``), and so is any connection whose closing write does not finish within
``CLOSE_TIMEOUT``; ``serve`` returns only once the socket is gone, so the caps count a connection
exactly as long as it holds a socket.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final, Literal, Protocol, TypeAlias, final

import anyio
import anyio.abc
import anyio.lowlevel
import msgspec

from .._compat.uvicorn import reset_connection
from ._asgi import Message, Receive, Scope, Send, peer_of
from ._http import Refusal
from ._metrics import ConnectionKind, ServerMetrics, connection_kind
from ._settings import ServerSettings
from ._signals import chain_exit_signals

__all__ = ["CLOSE_TIMEOUT", "HEARTBEAT", "WAITING", "Connection", "Engine", "Handoff",
           "Outcome", "ServerStatistics", "Source"]

logger = logging.getLogger("streamwire.server")

#: How a connection ended; ``refused`` is a request answered with an error before any streaming.
Outcome: TypeAlias = Literal["open", "done", "disconnect", "evicted", "shutdown", "error",
                             "refused"]

#: How long the last write of a connection (a shutdown ``fail`` frame, the closing empty body) may
#: take before the connection is abandoned; it runs shielded from cancellation.
CLOSE_TIMEOUT: Final = 1.0
#: The closing write of an evicted consumer where the server offers no reset (granian, a wrapped
#: ``send``): its window is already full, so the write would only wait.
EVICT_CLOSE_TIMEOUT: Final = 0.1

HEARTBEAT: Final = b": heartbeat\n\n"
#: The heartbeat of a stream that has no chunk yet (its reader knows the writer has not begun).
WAITING: Final = b": waiting\n\n"
_BODY: Final = "http.response.body"
_END: Final[Message] = {"type": _BODY, "body": b"", "more_body": False}
_monotonic = time.monotonic


async def _not_started(message: Message) -> None:
    raise RuntimeError("the connection's response has not started")


class Handoff(Protocol):
    """Who writes to a connection its source handed over (a fan-out hub's follower)."""

    def stop(self) -> None:
        """End the connection for the reason in its ``outcome`` (a shutdown)."""
        ...

    def leave(self) -> None:
        """The connection's task ends: stop writing to it."""
        ...

    async def follow(self, receive: Receive) -> None:
        """The connection's own task while handed over: until the client leaves."""
        ...


class Connection:
    """One open streaming response: what the engine counts, drains, reports and writes through."""

    __slots__ = ("beat", "busy_since", "closed", "cursor", "frames", "handoff", "kind",
                 "last_write", "on_stop", "outcome", "peer", "scope", "send", "started",
                 "stream_id")

    def __init__(self, stream_id: str, cursor: int, peer: str) -> None:
        #: the stream it reads ("": none, counted against the server's cap only)
        self.stream_id = stream_id
        self.cursor = cursor
        self.peer = peer
        #: what it streams, for ``/metrics`` (``_metrics.connection_kind``)
        self.kind: ConnectionKind = "direct"
        self.outcome: Outcome = "open"
        self.scope: anyio.CancelScope | None = None
        self.started = self.last_write = _monotonic()
        #: monotonic time the pending write began, 0.0 when none is pending
        self.busy_since = 0.0
        self.frames = 0
        #: the comment the watchdog writes on a quiet connection
        self.beat = HEARTBEAT
        self.send: Send = _not_started
        #: the body was ended (the rest of the source's work no longer concerns the client)
        self.closed = False
        #: a source's hook, run first by ``stop`` (a producer's abort signal)
        self.on_stop: Callable[[Connection], None] | None = None
        #: who writes to it now, when its source handed it over
        self.handoff: Handoff | None = None

    def stop(self, outcome: Outcome) -> None:
        """End the connection (first reason wins): cancels its task group, or has its handoff
        end it."""
        if self.outcome == "open":
            self.outcome = outcome
        if self.on_stop is not None:
            self.on_stop(self)
        if self.handoff is not None:
            self.handoff.stop()
        elif self.scope is not None:
            self.scope.cancel()

    async def write(self, data: bytes) -> None:
        """Write ``data`` to the body; the watchdog evicts the consumer if it stays pending."""
        self.busy_since = now = _monotonic()
        await self.send({"type": _BODY, "body": data, "more_body": True})
        self.busy_since = 0.0
        self.last_write = now

    async def end(self) -> None:
        """End the body now (a source whose client needs nothing more)."""
        self.closed = True
        await self.send(_END)


#: What ``Source.pump`` returns when asked for the first write only and more follows.
MORE: Final = "more"


class Source(Protocol):
    """What one streaming response writes; the engine owns everything else."""

    #: write the first message before the engine's task group exists (``pump(conn, None)``)
    eager: bool

    async def pump(self, conn: Connection, tg: anyio.abc.TaskGroup | None
                   ) -> Handoff | Literal["more"] | None:
        """Write the body with ``conn.write`` to its end (None: the engine ends the body), or
        until a ``Handoff`` took the connection over. ``tg`` is the connection's task group (a
        source may start helpers in it); None for an eager source's first call, which writes one
        message and returns ``MORE`` if more follows. A client that left (``OSError`` from a
        write) is ``conn.stop("disconnect")``."""
        ...

    def last_words(self, conn: Connection) -> bytes:
        """What goes before the end of the body when the connection ends ``shutdown``."""
        ...

    def holds(self) -> bool:
        """Has ``aclose`` anything to release? (None of a connection's time goes to a shielded
        ``aclose`` with nothing to do.)"""
        ...

    async def aclose(self) -> None:
        """Release what the source holds (run once, shielded, after the pump, if it ``holds``)."""
        ...


@final
class ServerStatistics(msgspec.Struct, frozen=True):
    """Counters of a ``StreamApp`` (anyio ``statistics()`` style)."""

    open_connections: int
    opened_total: int
    evicted_total: int
    refused_total: int
    draining: bool


class Engine:
    """The streaming connections of one app: admission, running, drain, counters."""

    def __init__(self, settings: ServerSettings, metrics: ServerMetrics | None = None) -> None:
        self.settings = settings
        self.metrics = metrics if metrics is not None else ServerMetrics()
        self.retry_after = str(settings.retry_after)
        self.conns: set[Connection] = set()
        self.per_stream: dict[str, int] = {}
        self.opened = self.evicted = self.refused = 0
        self.draining = False
        self._drained: anyio.Event | None = None
        #: What the first exit signal waits for before ``begin_shutdown`` (the app's runs
        #: draining: ``StreamApp``); None: nothing, the streams stop at once.
        self.hold: Callable[[], Awaitable[None]] | None = None
        self._signals_loop: object = None  # the event loop whose exit signals drain this app

    # ---- admission -----------------------------------------------------------------------------

    def admit(self, stream_id: str, scope: Scope, cursor: int = 0) -> Connection:
        """Check both caps and take a slot for a reader of ``stream_id`` ("": none), with no await
        in between. Raises ``Refusal`` 503 (draining, ``max_connections``) or 429
        (``max_connections_per_stream``), with ``Retry-After``."""
        settings = self.settings
        retry = {"Retry-After": self.retry_after}
        if self.draining:
            raise Refusal(503, "the server is shutting down; re-attach elsewhere", retry)
        if len(self.conns) >= settings.max_connections:
            raise Refusal(503, f"the server has {settings.max_connections} open streams "
                                "(create_app(max_connections=...))", retry)
        if stream_id and self.per_stream.get(stream_id, 0) >= settings.max_connections_per_stream:
            raise Refusal(429, f"stream {stream_id!r} has {settings.max_connections_per_stream} "
                                "readers (create_app(max_connections_per_stream=...))", retry)
        conn = Connection(stream_id, cursor, peer_of(scope))
        conn.kind = connection_kind(scope)
        self.conns.add(conn)
        if stream_id:
            self.per_stream[stream_id] = self.per_stream.get(stream_id, 0) + 1
        return conn

    def release(self, conn: Connection) -> None:
        """Uncount ``conn``: its response is over and its socket closed or reset (``serve``
        returns only then), or it was refused (``outcome`` ``refused``)."""
        self.conns.discard(conn)
        stream_id = conn.stream_id
        if stream_id:
            left = self.per_stream[stream_id] - 1
            if left:
                self.per_stream[stream_id] = left
            else:
                del self.per_stream[stream_id]
        self.metrics.frames_closed += conn.frames
        if conn.outcome == "evicted":
            self.evicted += 1
        if self._drained is not None and not self.conns:
            self._drained.set()
        if conn.outcome != "refused":
            logger.info("sse close stream=%s peer=%s frames=%d outcome=%s seconds=%.1f",
                        stream_id, conn.peer, conn.frames, conn.outcome,
                        _monotonic() - conn.started, extra={"stream_id": stream_id})

    def refuse(self, conn: Connection | None) -> None:
        """``conn`` was admitted but its request is refused after all: give its slot back."""
        if conn is not None:
            conn.outcome = "refused"
            self.release(conn)

    # ---- running -------------------------------------------------------------------------------

    async def serve(self, conn: Connection, source: Source, send: Send, receive: Receive, *,
                    headers: list[tuple[bytes, bytes]], heartbeat: float | None,
                    status: int = 200, first: bytes = b"") -> None:
        """Start the response of an admitted ``conn`` (``first``: its first bytes), stream
        ``source`` to its end, close or reset it, and release the slot. ``heartbeat`` paces the
        watchdog's comments (None: none)."""
        conn.send = send
        self.opened += 1
        logger.info("sse open stream=%s cursor=%d peer=%s", conn.stream_id, conn.cursor,
                    conn.peer, extra={"stream_id": conn.stream_id})
        if self.settings.drain_on_signal:
            self.chain_signals()
        running = False
        try:
            await send({"type": "http.response.start", "status": status, "headers": headers})
            if first:
                await conn.write(first)
            running = True
            # (the run is written out here, not in a coroutine of its own: a follower waits in
            # this frame for as long as it follows, and each frame more is memory per reader)
            handoff: Handoff | None = None
            try:
                handoff = await self._solo(conn, source, receive, heartbeat)
                if handoff is not None:
                    await handoff.follow(receive)
            except anyio.get_cancelled_exc_class():
                # Cancelled from outside (the server's own shutdown timeout): still owe a
                # terminal.
                handoff = conn.handoff
                if handoff is not None:
                    handoff.leave()
                if conn.outcome == "open":
                    conn.outcome = "shutdown"
                if not conn.closed:
                    with anyio.move_on_after(CLOSE_TIMEOUT, shield=True) as closing:
                        await _close(conn, source)
                    if closing.cancelled_caught:
                        reset_connection(conn.send)
                raise
            await self._end(conn, source, handoff)
        except OSError:
            conn.outcome = "disconnect"
            if conn.on_stop is not None:
                conn.on_stop(conn)
        finally:
            if not running:  # the client left before the source ran: release what it holds
                await _release(source)
            self.release(conn)

    async def _end(self, conn: Connection, source: Source, handoff: Handoff | None) -> None:
        """End a connection whose source (or hub) is done: reset it when evicted, else close
        it unless the hub or the source already ended its body."""
        if conn.outcome == "evicted" and await _reset(conn.send):
            return
        if handoff is not None or conn.closed:
            return  # the hub (or the source) ended the body, or the client left
        with anyio.move_on_after(EVICT_CLOSE_TIMEOUT if conn.outcome == "evicted"
                                 else CLOSE_TIMEOUT, shield=True) as closing:
            await _close(conn, source)
        if closing.cancelled_caught:  # the peer stopped reading: do not leave the socket flushing
            await _reset(conn.send)

    async def _solo(self, conn: Connection, source: Source, receive: Receive,
                    heartbeat: float | None) -> Handoff | None:
        """The connection on its own task, with its watchdog and disconnect listener; returns the
        ``Handoff`` its source handed it to, if any."""
        result: Handoff | Literal["more"] | None = MORE
        try:
            if source.eager:
                # A reader of a live stream is usually caught up by its first frame and joins a
                # hub at once: that frame goes out before any watchdog or listener exists (its
                # write cannot wait: nothing is buffered on a new connection yet).
                result = await source.pump(conn, None)
            if result == MORE:
                async with anyio.create_task_group() as tg:
                    conn.scope = tg.cancel_scope
                    if conn.outcome != "open":  # stopped before the group existed
                        tg.cancel_scope.cancel()
                    tg.start_soon(_watchdog, conn, heartbeat, self.settings.send_timeout)
                    tg.start_soon(_listen, conn, receive)
                    result = await source.pump(conn, tg)
                    tg.cancel_scope.cancel()
                conn.scope = None
        finally:
            await _release(source)
        if result is None or result == MORE:
            if conn.outcome == "open":
                conn.outcome = "done"
            return None
        return result

    # ---- shutdown ------------------------------------------------------------------------------

    def chain_signals(self) -> Callable[[], None] | None:
        """Chain ``begin_shutdown`` in front of the server's SIGINT / SIGTERM handlers, once per
        event loop. Runs on lifespan startup and, for a mounted app (which gets no lifespan), when
        its first connection opens: a server only waits on open streams, so chaining when the
        first one opens is in time. Returns the undo, or None when this loop is already chained."""
        try:
            loop: object = asyncio.get_running_loop()
        except RuntimeError:  # trio: nothing to chain onto
            return None
        if loop is self._signals_loop:
            return None
        self._signals_loop = loop
        undo = chain_exit_signals(self.begin_shutdown, self.hold)

        def unchain() -> None:
            undo()
            self._signals_loop = None

        return unchain

    def begin_shutdown(self) -> None:
        """Refuse new connections and stop every open one (each writes its last words and
        closes). Synchronous: call it on the event loop's thread."""
        self.draining = True
        for conn in list(self.conns):
            conn.stop("shutdown")

    async def drain(self, grace_period: float | None = None) -> bool:
        """``begin_shutdown()``, then wait up to ``grace_period`` seconds (default: the settings')
        for the connections to close. Returns whether all of them did."""
        self.begin_shutdown()
        if self.conns:
            self._drained = anyio.Event()
            grace = self.settings.shutdown_grace_period if grace_period is None else grace_period
            with anyio.move_on_after(grace):
                await self._drained.wait()
        return not self.conns

    def statistics(self) -> ServerStatistics:
        """Connection counters."""
        return ServerStatistics(len(self.conns), self.opened, self.evicted, self.refused,
                                self.draining)


async def _release(source: Source) -> None:
    """``source.aclose()`` if it ``holds`` anything: shielded, for up to ``CLOSE_TIMEOUT``."""
    if source.holds():
        with anyio.move_on_after(CLOSE_TIMEOUT, shield=True):
            await source.aclose()


async def _close(conn: Connection, source: Source) -> None:
    """The closing write: the source's last words on a shutdown, then the end of the body (for
    ``evicted`` the bare close: no terminal, so a reader re-attaches); nothing after a
    disconnect."""
    if conn.outcome == "disconnect":
        return  # nobody is listening
    send = conn.send
    try:
        if conn.outcome == "shutdown":
            words = source.last_words(conn)
            if words:
                await send({"type": _BODY, "body": words, "more_body": True})
        conn.closed = True
        await send(_END)
    except OSError:
        conn.outcome = "disconnect"


async def _reset(send: Send) -> bool:
    """Reset the connection and let the server see it gone before the caller releases its slot."""
    if not reset_connection(send):
        return False
    with anyio.CancelScope(shield=True):
        # the transport's connection_lost (which closes the socket) is already scheduled
        await anyio.lowlevel.checkpoint()
    return True


async def _watchdog(conn: Connection, heartbeat_interval: float | None,
                    send_timeout: float) -> None:
    """Heartbeats while idle; eviction when one write stalls for ``send_timeout``."""
    while not conn.closed:
        now = _monotonic()
        if conn.busy_since:
            stalled = now - conn.busy_since
            if stalled >= send_timeout:
                conn.stop("evicted")
                return
            delay = send_timeout - stalled
        else:
            idle = now - conn.last_write
            if heartbeat_interval and idle >= heartbeat_interval:
                with anyio.move_on_after(send_timeout) as stalled_scope:
                    await conn.write(conn.beat)
                if stalled_scope.cancelled_caught:
                    conn.stop("evicted")
                    return
                continue
            delay = (min(heartbeat_interval - idle, send_timeout) if heartbeat_interval
                     else send_timeout)
        await anyio.sleep(delay)


async def _listen(conn: Connection, receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            if not conn.closed:  # once the body ended, nothing the client gets is cut short
                conn.stop("disconnect")
            return
