"""The source of ``GET /streams/{id}/sse`` (and ``/runs/{id}/sse``): a log reader's frames as wire
v2 SSE, run by ``_engine.Engine``.

The pump pulls frames from ``log.read(stream_id, cursor)``, encodes each one and writes it. It
never reads ahead: the only buffers are the log's bounded per-reader queue and the server's
flow-controlled write buffer, so a slow consumer stalls the write (and the engine's watchdog
evicts it after ``send_timeout``: a reset with no terminal frame, which a reader treats as a drop
and re-attaches from its cursor: "The terminal state machine" in the wire v2 seed,
``seeds/000_e7e163321047a0a9.txt``).

A stream ends with the log's terminal frame. A log reader that raises gets a ``fail`` frame
(``_wire.failure_frame``); one that ends without a terminal frame gets the recoverable
``transport_stream_drop`` fail the same seed asks writers for ("Writers guarantee the terminal").
A server shutting down ends the stream with ``fail{recoverable: true, errorDetail.code:
SERVER_SHUTDOWN}`` (``last_words``).

With fan-out (``_fanout``), the source is eager: a reader of a live stream that is caught up by
its first frame joins its stream's hub before the engine opens a task group for it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import AsyncGeneratorType
from typing import Final, Literal

import anyio
import anyio.abc
import anyio.lowlevel

from ..frames import ChunkFrame, FailFrame, StreamFrame, encode_stream_frame, transport_drop_frame
from ..log._reader import ReadPosition
from ._engine import HEARTBEAT, MORE, Connection
from ._fanout import Fanout
from ._follower import Follower
from ._joining import Joining, batch_of, messages
from ._wire import SHUTDOWN_FRAME, TERMINALS, failure_frame

__all__ = ["SSE_RESPONSE_HEADERS", "StreamSource"]

SSE_RESPONSE_HEADERS: Final[list[tuple[bytes, bytes]]] = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]

# Yield to the event loop once every 32 frames (a power of two, tested with a mask).
_YIELD_EVERY_MASK: Final = 31

#: What ``_pump`` returns when the connection joined its stream's hub, and when it was asked for
#: the first frame only and more follow.
_JOINED: Final = FailFrame(error="joined", recoverable=True)
_MORE: Final = FailFrame(error="more", recoverable=True)


class StreamSource:
    """One connection's log reader, as an ``_engine.Source``."""

    __slots__ = ("eager", "expose_errors", "fanout", "follower", "frames", "joining", "position",
                 "started")

    def __init__(self, frames: AsyncIterator[StreamFrame], *, expose_errors: bool,
                 fanout: Fanout | None = None, position: ReadPosition | None = None,
                 joining: Joining | None = None) -> None:
        self.frames = frames
        self.expose_errors = expose_errors
        #: the hubs to join once caught up (with the ``position`` the log keeps for ``frames``)
        self.fanout = fanout if position is not None else None
        self.position = position
        self.eager = self.fanout is not None
        self.follower: Follower | None = None
        #: the hub it joins without reading on its own (``Fanout.prepare``), if any
        self.joining = joining if self.fanout is not None else None
        self.started = False  # ``frames`` was iterated

    async def pump(self, conn: Connection, tg: anyio.abc.TaskGroup | None
                   ) -> Follower | Literal["more"] | None:
        joining, fanout = self.joining, self.fanout
        if joining is not None and fanout is not None:
            self.joining = None
            body = joining.catch_up()
            try:
                if body is None:  # the hub moved on: read on its own from the cursor
                    if joining.first:
                        await conn.write(joining.first)
                else:
                    await conn.write(body)  # (its first bytes included)
            except OSError:
                conn.stop("disconnect")
                return None
            if body is not None:
                conn.frames += len(joining.frames)
                self.follower = fanout.enter(conn, joining)
                if self.follower is None:  # it moved on during the write: re-attach from here
                    conn.outcome = "evicted"
                return self.follower
        final: FailFrame | None = None
        try:
            final = await self._pump(conn, first_only=tg is None)
        finally:
            if fanout is not None and final is not _MORE:
                fanout.formed(conn.stream_id)  # it joined, or ended: others need not wait on it
        if final is _JOINED:
            return self.follower
        if final is _MORE:
            return MORE
        if final is not None:  # the fail frame a connection still owes
            try:
                await conn.write(encode_stream_frame(final))
            except OSError:
                conn.stop("disconnect")
        return None

    def last_words(self, conn: Connection) -> bytes:
        return encode_stream_frame(SHUTDOWN_FRAME)

    def holds(self) -> bool:
        # a reader the hub took over is the hub's for good: its task closes it (``Hub.run``),
        # and may be inside it now, even once this connection left the hub
        follower = self.follower
        if follower is not None and follower.took:
            return False
        # a log reader that never ran (one that joined its hub by ``Fanout.prepare``) holds
        # nothing: an async generator's code, ``finally`` included, starts at its first step
        return self.started or not isinstance(self.frames, AsyncGeneratorType)

    async def aclose(self) -> None:
        aclose = getattr(self.frames, "aclose", None)
        if aclose is not None and self.holds():
            await aclose()

    async def _pump(self, conn: Connection, first_only: bool) -> FailFrame | None:
        """Send frames until a terminal one; return a ``fail`` frame still owed, if any (or
        ``_JOINED`` once the connection follows its stream's hub; ``_MORE`` after one frame when
        ``first_only``). Past the first frame it reads a batch per step (``ReadPosition.paged``).

        A failure of the log becomes that ``fail`` frame; a failure of the write is the server's:
        an ``OSError`` (ASGI >= 2.4 servers raise it once the client is gone) ends the connection,
        anything else propagates.
        """
        frames, fanout, position = self.frames, self.fanout, self.position
        if position is not None and not first_only:
            # a batch per step, written in as few messages as it takes (not the eager first
            # write: with no watchdog yet, it must be one frame, which cannot wait)
            position.paged = True
        in_send = False
        unyielded = 0
        self.started = True
        try:
            async for last in frames:
                page = batch_of(position, last)
                bodies: list[bytes] = []
                for frame in page:
                    if type(frame) is ChunkFrame:
                        conn.beat = HEARTBEAT
                    bodies.append(encode_stream_frame(frame))
                terminal = type(last) in TERMINALS  # a terminal ends its batch
                if terminal and conn.outcome == "open":
                    # decided before the write: a shutdown landing while it is pending must not
                    # add a second terminal (at worst this one is cut off: a drop, which
                    # re-attaches)
                    conn.outcome = "done"
                in_send = True
                for body in messages(bodies):
                    await conn.write(body)
                in_send = False
                conn.frames += len(page)
                if terminal:
                    return None
                if (fanout is not None and position is not None and last is position.last
                        and not conn.busy_since and conn.outcome == "open"):
                    follower = fanout.join(conn, frames, position, last)
                    if follower is not None:
                        self.follower = follower
                        return _JOINED
                if first_only:
                    return _MORE
                unyielded += len(page)
                if unyielded > _YIELD_EVERY_MASK:
                    # A replay never waits on the log, and uvicorn's send() only suspends under
                    # flow control: without this the disconnect listener would not run until the
                    # whole backlog had been written into a dead socket.
                    unyielded = 0
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
            return failure_frame(exc, conn.stream_id, self.expose_errors)[0]
        conn.outcome = "error"
        return transport_drop_frame("the stream log's reader ended without a terminal frame")

