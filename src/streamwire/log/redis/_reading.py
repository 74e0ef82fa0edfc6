"""The reading side of ``RedisLog``: a reader subscribes first, reads a page (meta and entries
read atomically by a script), then applies the shared read rules (``streamwire.log._reader``) to
pages and to live messages of its epoch, and reads a fresh page whenever a view does not hold what
comes next (a gap, an overflow, another epoch, or the moment the writer's lease would lapse)."""

from __future__ import annotations

import asyncio
import math
from collections import OrderedDict
from collections.abc import AsyncIterator
from functools import partial
from typing import Final

from ...errors import LogError, StreamNotFoundError
from ...frames import StreamFrame, TruncatedFrame
from .._common import MAX_SAFE_INTEGER, check_cursor
from .._reader import (
    Joined,
    JoinMemo,
    ReaderState,
    ReadPosition,
    ReadView,
    attach,
    next_frames,
)
from ._commands import NotSent
from ._line import Line
from ._live import CLOSED, DUE, OVERFLOW, Dispatcher, Sub
from ._scripts import LiveKind
from ._views import GONE, PAGE, LiveView, Page

__all__ = ["RedisReading"]

#: Epochs remembered per ``RedisLog`` (one per recently read stream), oldest forgotten first.
_EPOCH_MEMORY: Final = 10_000
#: Chunks below a caught-up reader's position that the one page its joiners share reaches.
_JOIN_SPAN: Final = PAGE // 2
#: Streams whose joiners' shared page is remembered per ``RedisLog``.
_JOIN_PAGES: Final = 1024
#: Seconds a parked reader waits past the lease's end before it looks (clock granularity).
_LEASE_SLACK: Final = 0.01


class RedisReading:
    """``read`` for ``RedisLog`` (which provides the attributes and ``_keys`` / ``_page``)."""

    url: str
    max_reader_queue: int
    health_interval: float
    subscribe_timeout: float
    _closed: bool
    _commands: Line
    #: One dispatcher per server ('' on one server; a cluster's masters by ``host:port``).
    _dispatchers: dict[str, Dispatcher]
    _dispatch_tasks: set[asyncio.Task[None]]
    _epochs: OrderedDict[str, str]
    _readers: set[Sub]
    #: Per stream: the state a shared page was read for, its first cursor, the page, and the
    #: joins computed on it.
    _join_pages: OrderedDict[str, tuple[tuple[int, int, str], int, asyncio.Future[Page | None],
                                        JoinMemo]]

    def _keys(self, stream_id: str) -> tuple[str, str, str]:
        raise NotImplementedError

    async def _page(self, stream_id: str, after: int, count: int = PAGE,
                    mark: int = 2**53) -> Page | None:
        raise NotImplementedError

    def read(self, stream_id: str, cursor: int = 0, *, epoch: str | None = None,
             position: ReadPosition | None = None) -> AsyncIterator[StreamFrame]:
        """Frames from ``cursor``: replay, ``caught-up``, live, exactly one terminal.

        ``epoch`` (from ``StreamInfo.epoch``) makes a re-attach exact: when the stream was
        recreated since, a reader with ``cursor > 0`` gets ``truncated``. A broken connection to
        Redis raises a retryable ``LogError``; re-attach from the last sequence received.
        ``position`` is kept up to date with the reader's (the stream server shares one reader
        among its connections).
        """
        self._keys(stream_id)
        return self._read(stream_id, cursor, epoch, position)

    async def _read(self, stream_id: str, cursor: int, epoch: str | None,
                    position: ReadPosition | None) -> AsyncIterator[StreamFrame]:
        if type(cursor) is not int or cursor < 0 or cursor > MAX_SAFE_INTEGER:
            check_cursor(cursor, 0)
        channel = self._keys(stream_id)[2].encode()
        sub, dispatcher = await self._attach(channel)
        try:
            # the first page is read after subscribing: nothing falls in between
            page = await self._page(stream_id, cursor)
            if page is None:
                raise StreamNotFoundError(stream_id)
            known = epoch if epoch is not None else self._epochs.get(stream_id)
            if cursor == 0 or known in (None, page.epoch):  # else: this reader is of another one
                self._remember(stream_id, page.epoch)
            reader = attach(page, cursor, epoch=known)
            if isinstance(reader, TruncatedFrame):
                yield reader
                return
            if position is not None:
                position.state = reader
                position.join = partial(self._join, stream_id, reader)
            view: ReadView = page
            closed = False
            loop = asyncio.get_running_loop()
            due = _lease_due(page, loop)
            while True:
                step = next_frames(reader, view, closed)
                if step is None:  # the view does not hold what comes next: read a page
                    page = await self._page(stream_id, reader.pos, mark=reader.mark)
                    view = GONE if page is None else page
                    due = _lease_due(page, loop)
                    continue
                frames, done = step
                if frames and position is not None:
                    position.last = frames[-1]
                if frames and position is not None and position.paged:
                    position.page = frames
                    yield frames[-1]  # taken whole, in one step
                else:
                    for frame in frames:
                        yield frame
                if done:
                    return
                if frames:
                    continue
                # caught up: the next live message this reader does not have yet
                while True:
                    item = await sub.next(due - loop.time())
                    kind = item.kind
                    if item is CLOSED:
                        closed = True
                    elif item is OVERFLOW or item is DUE or item.epoch != reader.epoch:
                        # missed messages, another incarnation, or the writer's lease may have
                        # lapsed (then reading the page fails the stream): storage decides
                        page = await self._page(stream_id, reader.pos, mark=reader.mark)
                        view = GONE if page is None else page
                        due = _lease_due(page, loop)
                    elif (kind is LiveKind.REWOUND and item.number <= reader.mark) or (
                            kind is LiveKind.CHUNKS
                            and item.number + len(item.frames) - 1 <= reader.pos):
                        continue  # it has them
                    else:
                        view = LiveView(item)
                    break
        finally:
            dispatcher.drop(channel, sub)
            self._readers.discard(sub)

    async def _join(self, stream_id: str, like: ReaderState, cursor: int) -> Joined | None:
        """``ReadPosition.join`` of a reader in state ``like``: every joiner of the stream within
        ``_JOIN_SPAN`` chunks of it shares one page read, while ``like`` has not moved."""
        after = max(0, like.pos - _JOIN_SPAN)
        if cursor < after:
            return None
        key = (like.pos, like.mark, like.epoch)
        pages = self._join_pages
        shared = pages.get(stream_id)
        if shared is None or shared[0] != key:
            fetch = asyncio.ensure_future(self._page(stream_id, after, mark=like.mark))
            shared = pages[stream_id] = (key, after, fetch, JoinMemo())
            pages.move_to_end(stream_id)
            if len(pages) > _JOIN_PAGES:
                pages.popitem(last=False)
        try:
            page = await asyncio.shield(shared[2])
        except Exception:
            if pages.get(stream_id) is shared:  # the next joiner reads again
                del pages[stream_id]
            raise
        if page is None:
            return None
        # one memo per page: the page never changes (its stamp neither)
        return shared[3].join(0, page, cursor, like, epoch=self._epochs.get(stream_id))

    def _remember(self, stream_id: str, epoch: str) -> None:
        self._epochs[stream_id] = epoch
        self._epochs.move_to_end(stream_id)
        if len(self._epochs) > _EPOCH_MEMORY:
            self._epochs.popitem(last=False)

    async def _attach(self, channel: bytes) -> tuple[Sub, Dispatcher]:
        if self._closed:
            raise LogError("the Redis log is closed")
        dead = [node for node, d in self._dispatchers.items() if d.dead is not None]
        if dead:
            # a dispatcher ended (its task finished on its own): on a cluster, maybe because a
            # slot moved, so the routing is read again before this reader subscribes
            self._commands.stale()
            for node in dead:
                del self._dispatchers[node]
        try:
            node, factory = await self._commands.node_for(channel)
        except NotSent as exc:
            raise LogError(f"cannot reach Redis at {self._commands.url} ({exc}); retry",
                           retryable=True) from exc
        dispatcher = self._dispatchers.get(node)
        if dispatcher is None or dispatcher.dead is not None:
            dispatcher = self._dispatchers[node] = Dispatcher(
                factory, self.max_reader_queue, self.health_interval,
                sharded=self._commands.cluster)
            task = asyncio.get_running_loop().create_task(dispatcher.run())
            self._dispatch_tasks.add(task)
            task.add_done_callback(self._dispatch_tasks.discard)
        sub = Sub()
        self._readers.add(sub)
        try:
            await dispatcher.subscribe(channel, sub, self.subscribe_timeout, self._commands.url)
        except BaseException:
            self._readers.discard(sub)
            raise
        return sub, dispatcher



def _lease_due(page: Page | None, loop: asyncio.AbstractEventLoop) -> float:
    """The loop time at which a parked reader looks whether the writer's lease lapsed."""
    if page is None or page.lease_left is None:
        return math.inf
    return loop.time() + max(page.lease_left, 0.0) + _LEASE_SLACK
