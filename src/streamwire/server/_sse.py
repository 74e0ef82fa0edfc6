"""The ``GET /streams/{id}/sse`` endpoint of ``streamwire.server``: a raw ASGI streaming response.

Theory of operation. One connection is one task group holding three jobs, never one task per event:

* the *pump* (the handler's own task) pulls frames from ``log.read(stream_id, cursor)``, encodes
  each one and awaits ``send``. It never reads ahead: the only buffers are the log's bounded
  per-reader queue and the server's flow-controlled write buffer, so a slow consumer stalls ``send``;
* the *watchdog* writes heartbeat comments when nothing was written for ``heartbeat_interval`` and
  evicts the consumer when one ``send`` has been stalled for ``send_timeout`` (a reset with no
  terminal frame, which a reader treats as a drop and re-attaches from its cursor: "The terminal
  state machine" in the wire v2 seed, ``seeds/000_e7e163321047a0a9.txt``);
* the *listener* awaits ``http.disconnect`` so a client that leaves is noticed at once, even while
  the stream is quiet, and its log subscription is released.

Every connection ends in exactly one of: the log's terminal frame, then the body closes (``done``);
the client left (``disconnect``, nothing more is written); a reset (``evicted``: no terminal, so
the reader re-attaches); a ``fail{recoverable: true}`` terminal when the server shuts down
(``shutdown``) or the log broke (``error``). A log reader that ends without a terminal frame gets
the recoverable ``transport_stream_drop`` fail the same seed asks writers for ("Writers guarantee
the terminal").

An evicted consumer is not sent a closing write: its window is full, and a close that waits for
the buffer to drain would keep its socket and buffered bytes for as long as it stays. The
connection is reset instead (``_compat.uvicorn``), and so is any connection whose closing write does not
finish within ``CLOSE_TIMEOUT``; ``serve_frames`` returns only once the socket is gone, so the
caps count a connection exactly as long as it holds a socket.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

import anyio
import anyio.lowlevel

from .._compat.uvicorn import reset_connection
from ..errors import LogError, StreamwireError
from ..frames import (
    ChunkFrame,
    EndFrame,
    FailFrame,
    StreamFrame,
    TruncatedFrame,
    encode_stream_frame,
    transport_drop_frame,
)
from ..log._reader import ReadPosition

if TYPE_CHECKING:
    import asyncio

    from ._fanout import Fanout, Hub

Scope: TypeAlias = MutableMapping[str, Any]
Message: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]

#: How a connection ended; ``refused`` is a request answered with an error before any streaming.
Outcome: TypeAlias = Literal["open", "done", "disconnect", "evicted", "shutdown", "error",
                             "refused"]

logger = logging.getLogger("streamwire.server")

#: How long the last write of a connection (a shutdown ``fail`` frame, the closing empty body) may
#: take before the connection is abandoned; it runs shielded from cancellation.
CLOSE_TIMEOUT: Final = 1.0
#: The closing write of an evicted consumer where the server offers no reset (granian, a wrapped
#: ``send``): its window is already full, so the write would only wait.
EVICT_CLOSE_TIMEOUT: Final = 0.1

SSE_RESPONSE_HEADERS: Final[list[tuple[bytes, bytes]]] = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]

HEARTBEAT: Final = b": heartbeat\n\n"
WAITING: Final = b": waiting\n\n"
TERMINALS: Final = frozenset({EndFrame, FailFrame, TruncatedFrame})

SHUTDOWN_FRAME: Final = FailFrame(
    error="the server is shutting down; re-attach from your cursor",
    recoverable=True,
    error_detail={"code": "SERVER_SHUTDOWN"},
)


async def _not_started(message: Message) -> None:
    raise RuntimeError("the connection's response has not started")


class Connection:
    """One open SSE response; the server keeps these to count, drain and report them (``hub``,
    ``buffered``, ``outbox`` and the like are a hub follower's: ``_fanout``)."""

    __slots__ = ("backlog", "base", "buffered", "busy_since", "closed", "cursor", "drainer",
                 "frames", "hub", "last_write", "low_water", "outbox", "outcome", "peer", "scope",
                 "send_fn", "started", "stream_id", "waiting")

    def __init__(self, stream_id: str, cursor: int, peer: str) -> None:
        self.stream_id = stream_id
        self.cursor = cursor
        self.peer = peer
        self.outcome: Outcome = "open"
        self.scope: anyio.CancelScope | None = None
        self.started = self.last_write = time.monotonic()
        #: monotonic time the pending ``send`` began, 0.0 when none is pending
        self.busy_since = 0.0
        self.frames = 0
        self.waiting = False
        self.hub: Hub | None = None
        self.send_fn: Send = _not_started
        #: the size of the transport's write buffer (``int``, which gives 0, until it follows)
        self.buffered: Callable[[], int] = int
        self.low_water = 0
        self.base = 0  # the hub's frame count when it joined
        self.outbox: deque[Message] | None = None  # a lagging follower's messages
        self.backlog = 0  # bytes in the outbox
        self.drainer: asyncio.Task[None] | None = None
        self.closed = False  # the hub or its drainer ended the body

    def stop(self, outcome: Outcome) -> None:
        """End the connection (first reason wins): cancels its task group, or has its hub end it."""
        if self.outcome == "open":
            self.outcome = outcome
        if self.hub is not None:
            self.hub.stop(self)
        elif self.scope is not None:
            self.scope.cancel()


async def serve_frames(
    conn: Connection,
    frames: AsyncIterator[StreamFrame],
    send: Send,
    receive: Receive,
    *,
    heartbeat_interval: float | None,
    send_timeout: float,
    expose_errors: bool,
    fanout: Fanout | None = None,
    position: ReadPosition | None = None,
) -> None:
    """Stream ``frames`` as the body of an already started response, then close or abandon it.

    With ``fanout`` (and the ``position`` the log keeps for ``frames``), the connection joins its
    stream's hub once it is caught up (``_fanout``); it then only waits for its client to leave.
    """
    conn.send_fn = send
    following = False
    try:
        following = await _solo(conn, frames, send, receive, heartbeat_interval, send_timeout,
                                expose_errors, fanout, position)
        del frames, position  # a follower keeps nothing of its solo phase
        if following:
            assert fanout is not None
            await fanout.follow(conn, receive)
    except anyio.get_cancelled_exc_class():
        # Cancelled from outside (the server's own shutdown timeout): still owe a terminal.
        hub = conn.hub
        if hub is not None:
            hub.leave(conn)
        if conn.outcome == "open":
            conn.outcome = "shutdown"
        if not conn.closed:
            with anyio.move_on_after(CLOSE_TIMEOUT, shield=True) as closing:
                await _close(conn, send)
            if closing.cancelled_caught:
                reset_connection(send)
        raise
    if conn.outcome == "evicted" and await _reset(send):
        return
    if following:
        return  # the hub or the follower's drainer ended the body (or the client left)
    with anyio.move_on_after(EVICT_CLOSE_TIMEOUT if conn.outcome == "evicted" else CLOSE_TIMEOUT,
                             shield=True) as closing:
        await _close(conn, send)
    if closing.cancelled_caught:  # the peer stopped reading: do not leave the socket flushing
        await _reset(send)


async def _solo(conn: Connection, frames: AsyncIterator[StreamFrame], send: Send,
                receive: Receive, heartbeat_interval: float | None, send_timeout: float,
                expose_errors: bool, fanout: Fanout | None,
                position: ReadPosition | None) -> bool:
    """The connection on its own reader, with its watchdog and disconnect listener; True when
    it joined its stream's hub (then its reader is closed, or is the hub's now)."""
    final: FailFrame | None = _MORE
    try:
        if fanout is not None:
            # A reader of a live stream is usually caught up by its first frame and joins the
            # hub at once: that frame goes out before any watchdog or listener exists (its
            # write cannot wait: nothing is buffered on a new connection yet).
            final = await _pump(conn, frames, send, expose_errors, fanout, position, True)
        if final is _MORE:
            async with anyio.create_task_group() as tg:
                conn.scope = tg.cancel_scope
                if conn.outcome != "open":  # shut down before the group existed
                    tg.cancel_scope.cancel()
                tg.start_soon(_watchdog, conn, send, heartbeat_interval, send_timeout)
                tg.start_soon(_listen, conn, receive)
                final = await _pump(conn, frames, send, expose_errors, fanout, position, False)
                if final is not _JOINED:
                    await _last_write(conn, send, final)
                tg.cancel_scope.cancel()
            conn.scope = None
        elif final is not _JOINED:
            await _last_write(conn, send, final)
    finally:
        # decided with no await since the join: the hub may end (or this follower may leave
        # it) before the group exits, and a reader the hub took over stays the hub's
        handed = final is _JOINED and conn.hub is not None and conn.hub.frames is frames
        aclose = getattr(frames, "aclose", None)
        if aclose is not None and not handed:
            with anyio.move_on_after(CLOSE_TIMEOUT, shield=True):
                await aclose()
    return final is _JOINED


async def _last_write(conn: Connection, send: Send, final: FailFrame | None) -> None:
    """Write the ``fail`` frame a connection still owes (if any); the connection is done."""
    if final is not None:
        try:
            await _write(conn, send, encode_stream_frame(final))
        except OSError:
            conn.stop("disconnect")
    if conn.outcome == "open":
        conn.outcome = "done"


async def _reset(send: Send) -> bool:
    """Reset the connection and let the server see it gone before the caller releases its slot."""
    if not reset_connection(send):
        return False
    with anyio.CancelScope(shield=True):
        # the transport's connection_lost (which closes the socket) is already scheduled
        await anyio.lowlevel.checkpoint()
    return True


async def _close(conn: Connection, send: Send) -> None:
    outcome = conn.outcome
    if outcome == "disconnect":
        return  # nobody is listening
    try:
        if outcome == "shutdown":
            await send({"type": "http.response.body", "body": encode_stream_frame(SHUTDOWN_FRAME),
                        "more_body": True})
        # done / evicted / shutdown / error: close the body (for ``evicted`` this is the bare
        # close: no terminal frame, so the reader re-attaches)
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    except OSError:
        conn.outcome = "disconnect"


async def _write(conn: Connection, send: Send, data: bytes) -> None:
    conn.busy_since = now = time.monotonic()
    await send({"type": "http.response.body", "body": data, "more_body": True})
    conn.busy_since = 0.0
    conn.last_write = now


# Yield to the event loop once every 32 frames (a power of two, tested with a mask).
_YIELD_EVERY_MASK: Final = 31

#: What ``_pump`` returns when the connection joined its stream's hub, and when it was asked for
#: the first frame only and more follow.
_JOINED: Final = FailFrame(error="joined", recoverable=True)
_MORE: Final = FailFrame(error="more", recoverable=True)


def failure_frame(exc: Exception, stream_id: str,
                  expose_errors: bool) -> tuple[FailFrame, Outcome]:
    """The ``fail`` frame a reader gets when its log reader raised ``exc``: the message of a
    client-side ``StreamwireError`` (or any, with ``expose_errors``), else a generic one; the
    exception itself goes to the server's log."""
    if isinstance(exc, StreamwireError):
        logger.warning("sse %s: log read failed: %r", stream_id, exc)
        return FailFrame(
            error=str(exc) if expose_errors or exc.status_hint < 500 else "the stream log failed",
            recoverable=exc.retryable or isinstance(exc, LogError),
            error_detail={"code": type(exc).__name__},
        ), "error"
    logger.error("sse %s: unexpected error while streaming", stream_id, exc_info=exc)
    return FailFrame(
        error=repr(exc) if expose_errors else "internal server error",
        recoverable=True,
        error_detail={"code": "INTERNAL"},
    ), "error"


async def _pump(conn: Connection, frames: AsyncIterator[StreamFrame], send: Send,
                expose_errors: bool, fanout: Fanout | None, position: ReadPosition | None,
                first_only: bool) -> FailFrame | None:
    """Send frames until a terminal one; return a ``fail`` frame still owed, if any (or
    ``_JOINED`` once the connection follows its stream's hub; ``_MORE`` after one frame when
    ``first_only``).

    A failure of the log becomes that ``fail`` frame; a failure of ``send`` is the server's: an
    ``OSError`` (ASGI >= 2.4 servers raise it once the client is gone) ends the connection,
    anything else propagates.
    """
    in_send = False
    try:
        async for frame in frames:
            kind = type(frame)
            if kind is ChunkFrame:
                conn.waiting = False
            terminal = kind in TERMINALS
            if terminal and conn.outcome == "open":
                # decided before the write: a shutdown landing while it is pending must not add
                # a second terminal (at worst this one is cut off: a drop, which re-attaches)
                conn.outcome = "done"
            in_send = True
            await _write(conn, send, encode_stream_frame(frame))
            in_send = False
            conn.frames += 1
            if terminal:
                return None
            if (fanout is not None and position is not None and frame is position.last
                    and not conn.busy_since and conn.outcome == "open"
                    and fanout.join(conn, frames, position, frame)):
                return _JOINED
            if first_only:
                return _MORE
            if not conn.frames & _YIELD_EVERY_MASK:
                # A replay never waits on the log, and uvicorn's send() only suspends under flow
                # control: without this the disconnect listener would not run until the whole
                # backlog had been written into a dead socket.
                await anyio.lowlevel.checkpoint()
    except OSError:
        if not in_send:
            raise
        conn.stop("disconnect")
        return None
    except Exception as exc:
        if in_send:
            raise
        conn.outcome = "error"
        return failure_frame(exc, conn.stream_id, expose_errors)[0]
    conn.outcome = "error"
    return transport_drop_frame("the stream log's reader ended without a terminal frame")


async def _watchdog(conn: Connection, send: Send, heartbeat_interval: float | None,
                    send_timeout: float) -> None:
    """Heartbeats while idle; eviction when one ``send`` stalls for ``send_timeout``."""
    while True:
        now = time.monotonic()
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
                    await _write(conn, send, WAITING if conn.waiting else HEARTBEAT)
                if stalled_scope.cancelled_caught:
                    conn.stop("evicted")
                    return
                continue
            delay = min(heartbeat_interval - idle, send_timeout) if heartbeat_interval else send_timeout
        await anyio.sleep(delay)


async def _listen(conn: Connection, receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            conn.stop("disconnect")
            return
