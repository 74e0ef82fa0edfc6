"""Live delivery for ``RedisLog``: the per-process pub/sub dispatcher, its topics and local
readers' bounded queues, and the parsed live messages (``LiveKind`` says what each one is)."""

from __future__ import annotations

import asyncio
import math
from collections import deque
from typing import Final, cast, final

import msgspec
from redis.asyncio.connection import Connection, ConnectionPool

from ..._compat.redis import new_connection, read_reply, send_command
from ...errors import LogError
from ...frames import ChunkFrame, EndFrame, FailFrame, RewoundFrame, StreamFrame
from ._scripts import LiveKind

__all__ = [
    "CLOSED",
    "DUE",
    "OVERFLOW",
    "Dispatcher",
    "Live",
    "Sub",
    "end_decoder",
    "fail_decoder",
    "rewound_decoder",
]

end_decoder: Final = msgspec.json.Decoder(EndFrame)
fail_decoder: Final = msgspec.json.Decoder(FailFrame)
rewound_decoder: Final = msgspec.json.Decoder(RewoundFrame)
_KINDS: Final = {ord(kind.value): kind for kind in LiveKind}


# --------------------------------------------------------------------------------------------
# Live messages and the per-process dispatcher


@final
class Live:
    """One parsed pub/sub message, shared by every local reader of the stream."""

    __slots__ = ("epoch", "frames", "kind", "number", "trimmed")

    def __init__(self, kind: LiveKind, epoch: str, number: int,
                 frames: tuple[StreamFrame, ...], trimmed: int = 0) -> None:
        self.kind = kind
        self.epoch = epoch
        self.number = number    # chunks: first sequence; end/fail: head; rewound: its number
        self.frames = frames
        self.trimmed = trimmed  # chunks: the highest sequence retention removed after the append


def _parse_live(data: bytes) -> Live:
    nl = data.index(b"\n")
    head = data[1:nl].split(b" ")
    kind, epoch, number, body = _KINDS[data[0]], head[0].decode(), int(head[1]), data[nl + 1:]
    frames: tuple[StreamFrame, ...]
    if kind is LiveKind.CHUNKS:
        out: list[StreamFrame] = []
        pos = 0
        for i, size in enumerate(head[2].split(b",")):
            end = pos + int(size)
            out.append(ChunkFrame(sequence=number + i, chunk=msgspec.Raw(body[pos:end])))
            pos = end
        return Live(kind, epoch, number, tuple(out), int(head[3]))
    elif kind is LiveKind.END:
        frames = (end_decoder.decode(body),)
    elif kind is LiveKind.FAIL:
        frames = (fail_decoder.decode(body),)
    elif kind is LiveKind.REWOUND:
        frames = (rewound_decoder.decode(body),)
    else:
        frames = ()
    return Live(kind, epoch, number, frames)


OVERFLOW: Final = Live(LiveKind.OVERFLOW, "", 0, ())
CLOSED: Final = Live(LiveKind.CLOSED, "", 0, ())
DUE: Final = Live(LiveKind.DUE, "", 0, ())


@final
class Sub:
    """One local reader's bounded queue of live messages."""

    __slots__ = ("due", "ended", "error", "overflow", "queue", "wake")

    def __init__(self) -> None:
        self.due = False
        self.queue: deque[Live] = deque()
        self.wake = asyncio.Event()
        self.overflow = False
        self.ended = False
        self.error: BaseException | None = None

    def push(self, item: Live, limit: int) -> None:
        if self.overflow or self.ended:
            return
        if item.kind is LiveKind.REWOUND:
            # chunks queued before a cleanup may be gone: the reader re-reads them from XRANGE
            # (survivors only), so it never takes a chunk the cleanup removed before it took it
            self.queue = deque(i for i in self.queue if i.kind is not LiveKind.CHUNKS)
        elif item.trimmed and self.queue and (
                self.queue[0].kind is not LiveKind.CHUNKS or self.queue[0].number <= item.trimmed):
            # retention removed chunks this reader has queued but not taken: drop them, so it
            # finds the gap, reads the floor and gets ``truncated`` as on every backend (queued
            # batches are in sequence order, so the head of the queue says whether any is hit)
            trimmed = item.trimmed
            self.queue = deque(i for i in self.queue
                               if i.kind is not LiveKind.CHUNKS or i.number > trimmed)
        if len(self.queue) >= limit:
            # stop queueing: the reader catches up from XRANGE (never unbounded, never lost)
            self.overflow = True
            self.queue.clear()
        else:
            self.queue.append(item)
        self.wake.set()

    def fail(self, error: BaseException | None) -> None:
        """End the reader: with ``error`` raised, or (None) with the log's closed frame."""
        if self.ended:
            return
        self.ended = True
        self.error = error
        self.queue.clear()
        self.queue.append(CLOSED)
        self.wake.set()

    async def next(self, within: float = math.inf) -> Live:
        """The next message, or ``DUE`` when none came within ``within`` seconds."""
        timer = None
        if within < math.inf:
            loop = asyncio.get_running_loop()
            timer = loop.call_later(max(within, 0.0), self._due)
        try:
            return await self._next()
        finally:
            if timer is not None:
                timer.cancel()

    def _due(self) -> None:
        self.due = True
        self.wake.set()

    async def _next(self) -> Live:
        while True:
            if self.due:
                self.due = False
                if not self.queue and self.error is None and not self.overflow:
                    return DUE
            if self.error is not None:
                raise self.error
            if self.overflow:
                self.overflow = False
                self.queue.clear()
                return OVERFLOW
            if self.queue:
                return self.queue.popleft()
            self.wake.clear()
            await self.wake.wait()


@final
class _Topic:
    """The process's subscription to one stream's channel and its local readers."""

    __slots__ = ("ready", "sent", "subs")

    def __init__(self) -> None:
        self.subs: set[Sub] = set()
        self.sent = False
        self.ready = asyncio.Event()


@final
class Dispatcher:
    """One pub/sub connection for the whole ``RedisLog``: subscribes a channel while it has local
    readers and fans each message out to them. Any connection error ends every attached reader
    with a retryable ``LogError``; the next reader starts a fresh dispatcher.

    ``sharded`` (a Redis Cluster: one dispatcher per master): sharded pub/sub, ``SSUBSCRIBE``
    one channel per command (a command's channels must share a slot); when the server drops a
    subscription by itself (its slot moved) the readers end with a retryable ``LogError``."""

    def __init__(self, factory: ConnectionPool, max_queue: int, health_interval: float,
                 *, sharded: bool = False) -> None:
        self._factory = factory
        self._sharded = sharded
        self._unsubscribing: dict[bytes, int] = {}
        self._max_queue = max_queue
        self._health = health_interval
        self._ping_at: float | None = None
        self._heard = 0.0  # loop time of the last reply on the subscription
        self.topics: dict[bytes, _Topic] = {}
        self._subscribed: set[bytes] = set()
        self._pending: dict[bytes, deque[_Topic]] = {}
        self._wake = asyncio.Event()
        self.dead: BaseException | None = None

    def want(self, channel: bytes) -> _Topic:
        topic = self.topics.get(channel)
        if topic is None:
            topic = self.topics[channel] = _Topic()
            self._wake.set()
        return topic

    async def subscribe(self, channel: bytes, sub: Sub, within: float, url: str) -> None:
        """Add ``sub`` to the channel's local readers; return once Redis confirmed the
        subscription (``LogError`` after ``within`` seconds, or when the dispatcher died)."""
        topic = self.want(channel)
        topic.subs.add(sub)
        try:
            async with asyncio.timeout(within):
                await topic.ready.wait()
        except TimeoutError:
            self.drop(channel, sub)
            raise LogError(f"Redis at {url} did not confirm a subscription within "
                           f"subscribe_timeout={within}s; raise it or check the server",
                           retryable=True) from None
        if sub.error is not None:
            raise sub.error

    def drop(self, channel: bytes, sub: Sub) -> None:
        topic = self.topics.get(channel)
        if topic is not None:
            topic.subs.discard(sub)
            if not topic.subs:
                del self.topics[channel]
                self._wake.set()

    async def run(self) -> None:
        conn = new_connection(self._factory)
        try:
            await conn.connect()  # type: ignore[no-untyped-call]
            async with asyncio.TaskGroup() as group:
                group.create_task(self._control(conn))
                await self._listen(conn)
        except asyncio.CancelledError:
            self._die(LogError("the Redis log was closed", retryable=True))
            raise
        except Exception as exc:  # a TaskGroup's ExceptionGroup or a connect error
            cause: BaseException = exc
            if isinstance(exc, ExceptionGroup):
                cause = cast(BaseException, exc.exceptions[0])  # pyright: ignore[reportUnknownMemberType]
            self._die(LogError(f"the Redis subscription broke ({cause}); re-attach from the "
                               "cursor", retryable=True), cause)
        finally:
            await conn.disconnect(nowait=True)

    def _die(self, error: LogError, cause: BaseException | None = None) -> None:
        if self.dead is not None:
            return
        if cause is not None:
            error.__cause__ = cause
        self.dead = error
        for topic in self.topics.values():
            topic.ready.set()
            for sub in topic.subs:
                # one exception object per reader: each raises it from its own task
                own = LogError(str(error), retryable=True)
                own.__cause__ = cause
                sub.fail(own)
        self.topics.clear()

    async def _control(self, conn: Connection) -> None:
        loop = asyncio.get_running_loop()
        self._heard = loop.time()
        while True:
            # wake at the latest after one interval (a timer, not asyncio.timeout: 3.11's can
            # swallow a cancellation that lands as it expires)
            timer = loop.call_later(self._health, self._wake.set)
            try:
                await self._wake.wait()
            finally:
                timer.cancel()
            # a quiet subscription may be a dead one (a half-open TCP connection delivers
            # nothing, forever): PING it, and give up when a PING got no PONG in time
            now = loop.time()
            if self._ping_at is not None and now - self._ping_at >= self._health:
                raise LogError(f"the Redis subscription did not answer PING within "
                               f"health_interval={self._health}s", retryable=True)
            if self._ping_at is None and now - self._heard >= self._health:
                self._ping_at = now
                await send_command(conn, "PING")
            self._wake.clear()
            new = [ch for ch, t in self.topics.items() if not t.sent]
            gone = [ch for ch in self._subscribed if ch not in self.topics]
            for ch in new:
                topic = self.topics[ch]
                topic.sent = True
                self._pending.setdefault(ch, deque()).append(topic)
            self._subscribed.difference_update(gone)
            self._subscribed.update(new)
            if not conn.is_connected:
                # never let redis-py reconnect this socket silently: messages sent meanwhile
                # would be lost without a trace; the listener fails and readers re-attach
                raise LogError("the Redis subscription connection closed", retryable=True)
            if self._sharded:
                for ch in gone:
                    self._unsubscribing[ch] = self._unsubscribing.get(ch, 0) + 1
                    await send_command(conn, "SUNSUBSCRIBE", ch)
                for ch in new:
                    await send_command(conn, "SSUBSCRIBE", ch)
                continue
            if gone:
                await send_command(conn, "UNSUBSCRIBE", *gone)
            if new:
                await send_command(conn, "SUBSCRIBE", *new)

    async def _listen(self, conn: Connection) -> None:
        max_queue = self._max_queue
        loop = asyncio.get_running_loop()
        while True:
            raw = await read_reply(conn)
            self._heard = loop.time()
            if raw == b"PONG":  # a PING while subscribed to nothing gets the plain reply
                self._ping_at = None
                continue
            if type(raw) is not list or len(cast(list[bytes], raw)) < 2:
                raise LogError(f"unexpected reply on the Redis subscription: {raw!r}")
            reply = cast(list[bytes], raw)
            kind, channel = reply[0], reply[1]
            if kind == b"message" or kind == b"smessage":
                topic = self.topics.get(channel)
                if topic is not None and topic.subs:
                    item = _parse_live(reply[2])
                    for sub in topic.subs:
                        sub.push(item, max_queue)
            elif kind == b"subscribe" or kind == b"ssubscribe":
                waiting = self._pending.get(channel)
                if waiting:
                    waiting.popleft().ready.set()
                    if not waiting:
                        del self._pending[channel]
            elif kind == b"pong":
                self._ping_at = None
            elif kind == b"sunsubscribe":
                asked = self._unsubscribing.get(channel, 0)
                if not asked:
                    # the cluster moved the channel's slot: its readers re-attach (re-routed)
                    raise LogError(f"Redis dropped the subscription to {channel!r} (its slot "
                                   "moved); re-attach from the cursor", retryable=True)
                if asked == 1:
                    del self._unsubscribing[channel]
                else:
                    self._unsubscribing[channel] = asked - 1
