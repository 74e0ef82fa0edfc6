"""Fan-out: one log reader per stream, shared by every connection caught up on it.

Theory of operation. A connection starts alone: its own log reader replays from its cursor
(``_sse.StreamSource`` run by ``_engine.Engine``). Once it is caught up and has delivered all it fetched, it joins the
stream's hub when the hub's reader is in step with its own (``log._reader.in_step``: equal
states, so from then on both get exactly the same frames); when the stream has no hub, its own
reader becomes the hub's. From then on the hub's task takes each frame from that one reader,
encodes it once and writes the same message to every follower's ``send`` in one pass, as a
hand-written broadcast does: no task wakes per connection, no log read and no encode per
connection. The follower's own task only awaits ``receive()`` (the client leaving), as any raw
ASGI streaming response does. Every rule of a solo connection still holds: the frames are the
ones its own reader would have given (same state, same log), in order, each once; one terminal.

The hub never waits on one follower. It writes directly only to a follower whose transport's
write buffer is at or under the low-water mark, where uvicorn's ``send`` completes without
suspending (it suspends only while the transport paused writing, which takes the buffer above
the high-water mark and ends only at or under the low one). A lagging follower's messages go to
its outbox instead -- references to the shared messages -- written by a task that exists only
while the outbox is not empty. The hub reads on only when some follower took the last frame at
once and none that keeps reading is half ``max_backlog_bytes`` behind (``Hub._paced``): a burst
goes out at the pace of the slowest follower that keeps reading, and one that stopped (no write
finished for ``STALL_GRACE``) holds nobody. A follower that falls ``max_backlog_bytes`` behind, or
one of whose writes stalls ``send_timeout``, is evicted like a solo connection: reset, no
terminal, and the reader re-attaches from its cursor.

A re-attach storm (all readers at once, a few chunks behind) needs no reader per connection: the
first forms the hub, the others wait for it, then (``Fanout.prepare``) ask its reader what theirs
would give up to ``caught-up`` when then in step (``ReadPosition.join``: the read rules on one
view read for all), write that as one message (chunks encoded once per hub) and follow. Where
that is not exact (the hub moved on; a marker, a terminal, a far cursor) they read alone.

Where the log's writers run in this process (``MemoryLog``), the hub takes the pages of chunks
the log pushes (``ReadPosition.push``): each append's chunks go out from the appending task, in
its turn of the event loop, with no wake-up of the hub's task between the append and the writes
(as a hand-written broadcast writes from its producer's task). Everything else still reaches the
hub through its reader in its own task: terminals, markers, and every page while it paces (a
push never waits: when a follower lags, the hub takes ``push`` back until it has paced).

Under uvicorn's h11 protocol a follower's shared messages also skip its ``send``: the hub frames
each message once as h11 would (one chunk of a chunked body) and writes those bytes to every
follower's transport after the checks ``send`` makes (``_compat.uvicorn.DirectBody``), where
``send`` would have run h11's event and state machinery once per follower.

The hub owns its followers' state (``Follower``: the transport's buffer gauge, the outbox, its
drainer); the connection only points at its ``Follower`` as its ``handoff`` while it follows.

Only where the connection's transport can be seen (uvicorn's ``send``, unwrapped, on asyncio:
``_compat.uvicorn.resettable_transport``) and the log's ``read`` takes ``position=``; anywhere else each
connection keeps its own reader.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import Sequence
from typing import Any, Final, final

from .._compat.h11 import h11_chunk
from .._compat.uvicorn import Transport, reset_connection, resettable_transport
from ..frames import ChunkFrame, StreamFrame, encode_stream_frame, transport_drop_frame
from ..log import StreamLog, capabilities_of
from ..log._reader import ReadPosition, in_step
from ._asgi import Message, Send
from ._engine import HEARTBEAT, WAITING, Connection, Outcome
from ._follower import Follower, cancel_drainer, enqueue, wake
from ._joining import ENCODED_CACHE, Joining, batch_of, messages
from ._settings import ServerSettings
from ._wire import SHUTDOWN_FRAME, TERMINALS, failure_frame

__all__ = ["Fanout", "Hub", "Joining", "log_shares_readers"]

logger = logging.getLogger("streamwire.server")

_monotonic = time.monotonic
#: Seconds without a finished write after which a lagging follower is no longer waited for.
STALL_GRACE: Final = 1.0
_HTTP_BODY: Final = "http.response.body"
FORMING_WAIT: Final = 1.0  # seconds a storm waits (``Fanout.prepare``) for its hub to form


def log_shares_readers(log: StreamLog) -> bool:
    """Does ``log`` declare fan-out (``LogCapabilities.fanout``: its ``read`` keeps a
    ``ReadPosition``, ``position=``), so readers can be shared?"""
    return capabilities_of(log).fanout


@final
class Fanout:
    """The hubs of one app, by stream id, and the settings they share."""

    __slots__ = ("beats", "context", "expose_errors", "forming", "heartbeat_interval", "hubs",
                 "joinable", "max_backlog_bytes", "send_timeout")

    def __init__(self, settings: ServerSettings) -> None:
        self.hubs: dict[str, Hub] = {}
        self.heartbeat_interval = settings.heartbeat_interval
        self.send_timeout = settings.send_timeout
        self.max_backlog_bytes = settings.max_backlog_bytes
        self.expose_errors = settings.expose_errors
        self.beats: asyncio.Task[None] | None = None
        #: streams whose first re-attaching connection is forming a hub, for the others to join
        self.forming: dict[str, asyncio.Future[None]] = {}
        self.joinable = True  # until a hub's reader shows the log offers no ``join``
        #: the context of the tasks hubs start (a push runs in the appender's: not theirs to see)
        self.context = contextvars.copy_context()

    def _start_beats(self) -> None:
        if self.beats is None and self.heartbeat_interval:
            self.beats = asyncio.get_running_loop().create_task(
                self._beat(self.heartbeat_interval), context=self.context)

    def forget(self, hub: Hub) -> None:
        """``hub`` ends: no connection joins it any more (and no hub left: no heartbeats)."""
        hub.closing = True
        hub.position.push = None
        if self.hubs.get(hub.stream_id) is hub:
            del self.hubs[hub.stream_id]
        beats = self.beats
        if not self.hubs and beats is not None and beats is not asyncio.current_task():
            beats.cancel()
            self.beats = None

    async def _beat(self, interval: float) -> None:
        """Heartbeat comments on every quiet hub: one task for all of them (a hub's quiet spell
        is looked at every quarter interval, so a beat comes after 1 to 1.25 intervals)."""
        try:
            while self.hubs:
                await asyncio.sleep(interval / 4)
                now = _monotonic()
                for hub in list(self.hubs.values()):
                    if now - hub.last_write >= interval and not hub.closing:
                        await hub.broadcast(WAITING if hub.waiting else HEARTBEAT, lagging=False)
        finally:
            if self.beats is asyncio.current_task():
                self.beats = None

    @staticmethod
    def can_share(send: Send) -> bool:
        """Can a connection writing through ``send`` follow a hub?"""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        return resettable_transport(send) is not None

    async def prepare(self, stream_id: str, cursor: int) -> Joining | None:
        """A connection about to read ``stream_id`` from ``cursor``: what it would get from its
        own reader up to its ``caught-up``, when it would then be in step with the stream's hub
        (``ReadPosition.join``); None: it reads on its own."""
        hub = self.hubs.get(stream_id)
        if hub is None and self.joinable:
            forming = self.forming.get(stream_id)
            if forming is None:  # the first of a storm reads on its own, and forms the hub
                loop = asyncio.get_running_loop()
                forming = self.forming[stream_id] = loop.create_future()
                loop.call_later(FORMING_WAIT, self.formed, stream_id, forming)
                return None
            await asyncio.shield(forming)
            hub = self.hubs.get(stream_id)
        if hub is None or hub.closing or hub.position.join is None:
            return None
        try:
            joined = await hub.position.join(cursor)
        except Exception:  # its own reader meets the same error, and reports it
            return None
        return None if joined is None else Joining(hub, *joined)

    def formed(self, stream_id: str, forming: asyncio.Future[None] | None = None) -> None:
        """The stream's hub formed, or the connection that was to form it ended (or ``forming``
        took ``FORMING_WAIT``): the connections waiting for it in ``prepare`` go on."""
        if forming is None or self.forming.get(stream_id) is forming:
            forming = self.forming.pop(stream_id, None)
        if forming is not None and not forming.done():
            forming.set_result(None)

    def enter(self, conn: Connection, joining: Joining) -> Follower | None:
        """Make ``conn``, which wrote ``joining.catch_up()``, a follower of its hub, if that is
        still exact (None: the hub moved on while it wrote)."""
        transport = resettable_transport(conn.send)
        if transport is None or not joining.in_step():
            return None
        return joining.hub.add(conn, transport)

    def join(self, conn: Connection, frames: Any, position: ReadPosition,
             delivered: StreamFrame) -> Follower | None:
        """Make ``conn`` (which just delivered ``delivered`` from its own reader ``frames``) a
        follower of its stream's hub, when that is exact: the hub's reader is in step with its
        own, or the stream has no hub yet (then its reader becomes the hub's: ``Follower.took``).
        None: go on alone."""
        state = position.state
        if state is None or not state.caught_up or delivered is not position.last:
            return None
        transport = resettable_transport(conn.send)
        if transport is None:
            return None
        hub = self.hubs.get(conn.stream_id)
        if hub is None:
            hub = self.hubs[conn.stream_id] = Hub(self, conn.stream_id, frames, position,
                                                  delivered, conn.beat is WAITING)
            follower = hub.add(conn, transport)
            follower.took = True
            self.joinable = position.join is not None
            hub.task = asyncio.get_running_loop().create_task(hub.run(), context=self.context)
            self._start_beats()
            self.formed(conn.stream_id)
            return follower
        if hub.closing or not in_step(position, delivered, hub.position, hub.current):
            return None
        return hub.add(conn, transport)


@final
class Hub:
    """One stream's shared reader and the connections that follow it."""

    __slots__ = ("catch_up_bytes", "catch_ups", "closing", "count", "current", "encoded", "error",
                 "fanout", "followers", "frames", "last_write", "pace", "position", "ready",
                 "started", "stream_id", "task", "waiting")

    def __init__(self, fanout: Fanout, stream_id: str, frames: Any, position: ReadPosition,
                 current: StreamFrame, waiting: bool) -> None:
        self.fanout = fanout
        self.stream_id = stream_id
        self.frames = frames
        self.position = position
        #: the frame last taken from the reader (being delivered, or delivered)
        self.current = current
        self.waiting = waiting  # no chunk yet: heartbeats say ": waiting"
        # a dict as an ordered set: O(1) leave at 10,000 followers
        self.followers: dict[Follower, None] = {}
        self.count = 0  # frames delivered, for each follower's own count
        self.closing = False
        self.last_write = _monotonic()
        self.task: asyncio.Task[None] | None = None
        self.started = False  # its task took its first step (``run``)
        #: resolved when a follower's outbox drains, while the hub waits for one (``_paced``)
        self.ready: asyncio.Future[None] | None = None
        #: chunks encoded by sequence (in one epoch a sequence names one chunk: the same bytes)
        self.encoded: dict[int, bytes] = {}
        #: joiners' catch-up bodies by their frames' id (``Joining.catch_up``), and their size
        self.catch_ups: dict[int, tuple[list[StreamFrame], bytes]] = {}
        self.catch_up_bytes = 0
        self.pace = False  # a pushed page left a follower lagging: pace before the next page
        self.error: Exception | None = None  # a pushed page's delivery failed: end the hub

    def add(self, conn: Connection, transport: Transport) -> Follower:
        follower = Follower(self, conn, transport)
        conn.handoff = follower
        self.followers[follower] = None
        return follower

    # ---- followers leaving ----------------------------------------------------------------------

    def _remove(self, follower: Follower) -> None:
        if follower in self.followers:
            del self.followers[follower]
            follower.conn.frames += self.count - follower.base
            wake(self)  # the others may all be ready now
        follower.hub = None
        follower.conn.handoff = None
        if not self.followers and not self.closing:
            self._close()

    def leave(self, follower: Follower) -> None:
        """The follower's client left (or its task ends): forget it, and its outbox."""
        self._remove(follower)
        cancel_drainer(follower)

    def stop(self, follower: Follower) -> None:
        """End a follower for the reason already in its connection's ``outcome`` (a shutdown):
        its outbox is replaced by the recoverable shutdown ``fail`` and the end of the body,
        written by its drainer (the reader re-attaches from what it actually received)."""
        self._remove(follower)
        cancel_drainer(follower)
        follower.outbox = None
        enqueue(self.fanout, follower, {"type": _HTTP_BODY, "body": encode_stream_frame(
            SHUTDOWN_FRAME), "more_body": False})

    def evict(self, follower: Follower, why: str) -> None:
        """Reset a follower that does not keep up (no terminal: it re-attaches)."""
        conn = follower.conn
        if conn.outcome == "open":
            conn.outcome = "evicted"
        logger.info("sse %s: evicting %s: %s", self.stream_id, conn.peer, why)
        self._remove(follower)
        cancel_drainer(follower)
        follower.outbox = None
        reset_connection(follower.send)

    def _close(self) -> None:
        """No follower is left: stop reading (the reader's own cleanup runs as it is cancelled).
        A task not started yet is left to start: a coroutine cancelled before its first step
        never runs its ``finally``, and the reader it was to close (``run``) would stay open."""
        self.fanout.forget(self)
        if self.started and self.task is not None and self.task is not asyncio.current_task():
            self.task.cancel()

    # ---- delivery -------------------------------------------------------------------------------

    async def run(self) -> None:
        """The hub's task: every frame of the shared reader to every follower, then the end.
        The reader is the hub's to close, whatever ends it (``StreamSource.holds``)."""
        self.started = True
        frames, position = self.frames, self.position
        position.paged = True  # each batch in one step (``ReadPosition.page``), one message
        end: StreamFrame | None = None
        outcome: Outcome = "done"
        try:
            if self.closing:  # every follower left before the task's first step
                return
            position.push = self._pushed
            async for last in frames:
                self.current = last
                bodies, end = self._encode(batch_of(position, last))
                if self.pace:  # a pushed page left a follower lagging: as if we paced after it
                    self.pace = False
                    await self._paced()
                for body in messages(bodies):
                    if await self.broadcast(body, lagging=True):
                        await self._paced()
                if end is not None:
                    break
                if self.closing:  # the last follower left (or was evicted) meanwhile
                    return
                position.push = self._pushed
        except asyncio.CancelledError:
            error = self.error
            if error is None:
                raise
            asyncio.current_task().uncancel()  # type: ignore[union-attr]  # (we cancelled it)
            end, outcome = failure_frame(error, self.stream_id, self.fanout.expose_errors)
        except Exception as exc:
            end, outcome = failure_frame(exc, self.stream_id, self.fanout.expose_errors)
        finally:
            self.fanout.forget(self)
            aclose = getattr(frames, "aclose", None)
            if aclose is not None:  # a no-op unless it stopped at a yield (terminal, cancel)
                await aclose()
        if end is None:
            end, outcome = transport_drop_frame(
                "the stream log's reader ended without a terminal frame"), "error"
        await self._finish(end, outcome)

    def _encode(self, batch: Sequence[StreamFrame]) -> tuple[list[bytes], StreamFrame | None]:
        """A batch's frames encoded up to its terminal (each chunk once, kept for joiners), and
        the terminal, if it has one; counts them as delivered."""
        encoded = self.encoded
        bodies: list[bytes] = []
        end: StreamFrame | None = None
        for frame in batch:
            if type(frame) in TERMINALS:
                end = frame
                break
            body = encode_stream_frame(frame)
            if type(frame) is ChunkFrame:
                self.waiting = False
                if len(encoded) >= ENCODED_CACHE:
                    encoded.clear()
                encoded[frame.sequence] = body
            bodies.append(body)
        self.count += len(bodies)
        return bodies, end

    async def _pushed(self, page: Sequence[StreamFrame]) -> None:
        """A page of chunks the log pushed from an appending task (``ReadPosition.push``): the
        same writes as ``run``'s, which never wait; a follower left lagging makes the hub take
        ``push`` back and pace in its own task. Never raises into the appender: a failure ends
        the hub from its own task, as ``run``'s would."""
        self.current = page[-1]
        try:
            bodies, _ = self._encode(page)
            for body in messages(bodies):
                if await self.broadcast(body, lagging=True):
                    self.position.push = None
                    self.pace = True
        except Exception as exc:
            self.position.push = None
            self.error = exc
            if self.task is not None:
                self.task.cancel()

    async def broadcast(self, body: bytes, *, lagging: bool) -> bool:
        """Write one message to every follower: directly to those whose transport takes it
        without waiting, to the outbox of the others (``lagging=False``: skip them). Returns
        whether the hub should wait before reading on (``_paced``)."""
        message: Message = {"type": _HTTP_BODY, "body": body, "more_body": True}
        self.last_write = now = _monotonic()
        fanout = self.fanout
        direct = slow = False
        half = fanout.max_backlog_bytes >> 1
        framed: bytes | None = None  # what h11 would write for it: framed once, not per follower
        for follower in tuple(self.followers):
            if (follower.outbox is None
                    and follower.transport.get_write_buffer_size() <= follower.low_water):
                direct = True
                written = follower.body
                if written is not None and body:  # (h11 writes nothing for an empty body)
                    if framed is None:
                        framed = h11_chunk(body)
                    if written.write(framed):
                        continue
                try:
                    await follower.send(message)
                except OSError:  # ASGI >= 2.4 servers raise once the client is gone
                    self.leave(follower)
            elif lagging:
                enqueue(fanout, follower, message)
                if follower.backlog > half and now - follower.last_write < STALL_GRACE:
                    slow = True
        return lagging and (slow or not direct)

    async def _paced(self) -> None:
        """Read on only when it helps: some follower took the last frame at once, and none that
        is still taking bytes (a write finished within ``STALL_GRACE``) is half ``max_backlog_bytes``
        behind. A burst so goes out at the pace of the slowest follower that keeps reading, and
        is not held by one that stopped: that one falls behind, to eviction."""
        loop = asyncio.get_running_loop()
        half = self.fanout.max_backlog_bytes >> 1
        while self.followers and not self.closing:
            now = _monotonic()
            followers = self.followers
            if any(f.outbox is None for f in followers) and not any(
                    f.backlog > half and now - f.last_write < STALL_GRACE
                    for f in followers if f.outbox is not None):
                return
            ready = self.ready = loop.create_future()
            timer = loop.call_later(STALL_GRACE, wake, self)  # a follower may stall meanwhile
            try:
                await ready
            finally:
                self.ready = None
                timer.cancel()

    async def _finish(self, end: StreamFrame, outcome: Outcome) -> None:
        """Write the terminal (and the end of the body) to every follower."""
        message: Message = {"type": _HTTP_BODY, "body": encode_stream_frame(end),
                            "more_body": False}
        fanout = self.fanout
        for follower in tuple(self.followers):
            self.followers.pop(follower)
            conn = follower.conn
            conn.frames += self.count - follower.base + 1
            follower.hub = None
            conn.handoff = None
            if conn.outcome == "open":
                conn.outcome = outcome
            if (follower.outbox is None
                    and follower.transport.get_write_buffer_size() <= follower.low_water):
                conn.closed = True
                with contextlib.suppress(OSError):
                    await follower.send(message)
            else:
                enqueue(fanout, follower, message)
