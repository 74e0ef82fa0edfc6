"""A lagging follower's outbox (``_fanout``): the messages its hub wrote while its transport was
not taking them at once, written in order by a task that exists only while the outbox is not
empty, each write bounded like a solo connection's."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import TYPE_CHECKING

from .._compat.uvicorn import reset_connection
from ._asgi import Message
from ._engine import CLOSE_TIMEOUT

if TYPE_CHECKING:
    from ._fanout import Fanout, Follower, Hub

__all__ = ["cancel_drainer", "enqueue", "wake"]

_monotonic = time.monotonic


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
