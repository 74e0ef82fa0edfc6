"""A connection following a stream's hub (``_fanout``): the hub's state about it (``Follower``),
and its outbox: the messages its hub wrote while its transport was not taking them at once,
written in order by a task that exists only while the outbox is not empty, each write bounded
like a solo connection's."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import TYPE_CHECKING, final

from .._compat.uvicorn import Transport, direct_body, reset_connection
from ._asgi import Message, Receive
from ._engine import CLOSE_TIMEOUT, Connection

if TYPE_CHECKING:
    from ._fanout import Fanout, Hub

__all__ = ["Follower", "cancel_drainer", "enqueue", "wake"]

_monotonic = time.monotonic
_LOW_WATERS: dict[int, int] = {}  # one int object per low-water mark in use (``Follower``)


@final
class Follower:
    """A connection following a hub: the hub's state about it (``Connection.handoff``)."""

    __slots__ = ("backlog", "base", "body", "conn", "drainer", "hub", "last_write", "low_water",
                 "outbox", "send", "took", "transport")

    def __init__(self, hub: Hub, conn: Connection, transport: Transport) -> None:
        self.hub: Hub | None = hub
        self.conn = conn
        self.send = conn.send
        # A broadcast touches every follower's objects once per message: the transport (which
        # ``send`` writes to anyway) rather than a bound method of it, and one int object shared
        # by every follower with the same low-water mark, keep that to fewer cache lines.
        self.transport = transport
        low_water = transport.get_write_buffer_limits()[0]
        self.low_water = _LOW_WATERS.setdefault(low_water, low_water)
        self.base = hub.count  # the hub's frame count when it joined
        self.outbox: deque[Message] | None = None  # a lagging follower's messages
        self.backlog = 0  # bytes in the outbox
        self.last_write = _monotonic()  # of the outbox's last write (STALL_GRACE counts from it)
        self.drainer: asyncio.Task[None] | None = None
        self.took = False  # its connection's reader became the hub's
        #: its response's body written past ``send`` (uvicorn's h11 cycle, chunked), if it can be
        self.body = direct_body(conn.send)

    def stop(self) -> None:
        if self.hub is not None:
            self.hub.stop(self)

    def leave(self) -> None:
        if self.hub is not None:
            self.hub.leave(self)

    async def follow(self, receive: Receive) -> None:
        """The follower's own task: wait for the client to leave (or the hub to end the
        response, which uvicorn reports the same way), then leave the hub."""
        try:
            while (await receive())["type"] != "http.disconnect":
                pass
        finally:
            self.leave()
        if self.conn.outcome == "open":
            self.conn.outcome = "disconnect"


def enqueue(fanout: Fanout, follower: Follower, message: Message) -> None:
    """Queue ``message`` behind what the follower has not taken yet; evict past the backlog
    limit."""
    outbox = follower.outbox
    if outbox is None:
        outbox = follower.outbox = deque()
        follower.backlog = 0
        follower.last_write = _monotonic()  # lagging from now: STALL_GRACE counts from here
    outbox.append(message)
    follower.backlog += len(message["body"])
    if follower.backlog > fanout.max_backlog_bytes and message["more_body"]:
        hub = follower.hub
        if hub is not None:
            hub.evict(follower, f"{follower.backlog} bytes not taken, over max_backlog_bytes="
                                f"{fanout.max_backlog_bytes} (create_app(max_backlog_bytes=...))")
        return
    if follower.drainer is None:  # in the app's context: the appender's (``push``) is not ours
        follower.drainer = asyncio.get_running_loop().create_task(
            _drain(fanout, follower, outbox), context=fanout.context)


async def _drain(fanout: Fanout, follower: Follower, outbox: deque[Message]) -> None:
    """Write a lagging follower's outbox in order, each write bounded like a solo one's."""
    try:
        while outbox:
            message = outbox[0]
            last = not message["more_body"]
            try:
                async with asyncio.timeout(CLOSE_TIMEOUT if last else fanout.send_timeout):
                    await follower.send(message)
            except TimeoutError:
                hub = follower.hub
                if hub is not None:
                    hub.evict(follower,
                              f"a write stalled for send_timeout={fanout.send_timeout}s")
                else:  # its last write: the peer stopped reading
                    reset_connection(follower.send)
                return
            except OSError:
                return  # the client left: its own task notices
            outbox.popleft()
            follower.backlog -= len(message["body"])
            follower.last_write = _monotonic()
            if last:
                follower.conn.closed = True
                return
            if follower.backlog <= fanout.max_backlog_bytes >> 1:
                wake(follower.hub)
        if follower.outbox is outbox:
            follower.outbox = None
            wake(follower.hub)
    finally:
        if follower.drainer is asyncio.current_task():  # (not the next one: ``Hub.stop``'s)
            follower.drainer = None


def wake(hub: Hub | None) -> None:
    """Tell a hub waiting for a follower to drain (``Hub._paced``) that one did, or left."""
    if hub is not None and hub.ready is not None and not hub.ready.done():
        hub.ready.set_result(None)


def cancel_drainer(follower: Follower) -> None:
    drainer = follower.drainer
    if drainer is not None and drainer is not asyncio.current_task():
        drainer.cancel()
        follower.drainer = None
