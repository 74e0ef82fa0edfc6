"""``RedisLog``: the stream log in Redis, shared by every server process that points at it.

Strategy (after Centrifugo's Redis engine, ``research/anchors-resumable.md`` §2.3):

* **One Lua script per change.** Sequence allocation (``HINCRBY`` on the meta hash), the ``XADD``
  of each chunk with entry id ``<sequence>-0``, retention trimming and the ``PUBLISH`` to live
  readers run in one script, so a chunk is stored and announced atomically, or not at all. Status
  changes (end, fail, cleanup, reset, reactivate, delete) are scripts too. Scripts are sent with
  ``EVALSHA`` and loaded (``SCRIPT LOAD``) only when Redis answers ``NOSCRIPT``.
* **Keys** (``{prefix}`` defaults to ``streamwire``): ``{prefix}:s:{<id>}:meta`` (hash: head,
  status, run start, cleanup marker, retention floor, terminal payload, epoch),
  ``{prefix}:s:{<id>}:chunks`` (Redis Stream, fields ``s`` step and ``c`` chunk) and the pub/sub
  channel ``{prefix}:s:{<id>}:live``. The ``{<id>}`` hash tag keeps a stream's keys in one slot.
* **Live delivery without polling.** Per process, ONE pub/sub connection and one subscription per
  stream, whatever the number of local readers; a dispatcher task owned by the ``RedisLog`` parses
  each message once and hands the same frames to every local reader's bounded queue. A reader
  subscribes FIRST, then replays with ``XRANGE`` (meta and entries read atomically by a script),
  then merges live messages by sequence: duplicates are dropped, a gap (a published batch that
  starts past what the reader has) is filled from ``XRANGE``. A reader whose queue overflows
  (``max_reader_queue``) is not evicted: its queue is dropped and it catches up from ``XRANGE``.
* **Epochs.** ``create_stream`` stamps a random epoch; every live message carries it. A stream
  whose keys vanished (Redis restarted without persistence, a flush, an eviction) and was created
  again has a new epoch. What a reader gets then:

  - attached live: the next message or page shows the new epoch -> ``truncated{floor}``;
  - re-attaching with ``read(id, cursor, epoch=...)`` (``StreamInfo.epoch`` names it) or through
    the same ``RedisLog`` that served the old epoch (it remembers the last epoch per stream):
    ``truncated{floor}`` when ``cursor > 0`` and the epoch differs;
  - re-attaching through another process with no epoch: a cursor above the new head is refused
    (``StreamStateError``, as on every backend), a cursor at or below it cannot be told apart from
    a reader of the new run (the Protocol's cursor is an int). Pass ``epoch=`` to be exact.
  An append to a stream whose keys vanished raises ``StreamNotFoundError``: the log never
  recreates a stream behind the writer's back, so two runs are never mixed under one epoch.
* **Retention**: ``max_chunks_per_stream`` / ``max_bytes_per_stream`` trim the oldest chunks in
  the append script (``XTRIM MINID``) and raise the floor; a reader below it gets ``truncated``.
  Finished streams expire after ``finished_ttl`` seconds (``PEXPIRE``; 0 keeps them).
* **Faults.** A broken pub/sub connection (``CLIENT KILL``, a restart) ends every attached reader
  with a retryable ``LogError``; re-attaching from the cursor continues with nothing lost or
  repeated. Commands are never retried blindly: an append that fails before it reached Redis raises
  a retryable ``LogError`` ("not stored"); one that failed after it was sent raises a non-retryable
  ``LogError`` saying the outcome is unknown (compare ``info().head``), never a silent loss or a
  duplicate.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import secrets
import select
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Sequence
from typing import Any, Final, Literal, cast, final

import msgspec

try:
    from redis import exceptions as redis_errors
    from redis.asyncio.connection import Connection, ConnectionPool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'streamwire.log.redis needs the redis package: pip install "streamwire[redis]"') from exc

from ..errors import LogError, StreamNotFoundError, StreamStateError, UsageError
from ..frames import (
    CaughtUpFrame,
    ChunkFrame,
    EndFrame,
    EndStatus,
    FailFrame,
    RewoundFrame,
    StreamFrame,
    TerminalFrame,
)
from . import StreamInfo, StreamStatus
from ._common import (
    DEFAULT_FINISHED_TTL,
    DEFAULT_MAX_BYTES_PER_STREAM,
    DEFAULT_MAX_CHUNK_SIZE,
    DEFAULT_MAX_CHUNKS_PER_STREAM,
    FINISHED,
    check_cursor,
    check_end_status,
    check_limits,
    check_step,
    closed_frame,
    coerce_chunk,
    deleted_frame,
    is_truncated,
    truncated_frame,
)

__all__ = [
    "DEFAULT_COMMAND_TIMEOUT",
    "DEFAULT_HEALTH_INTERVAL",
    "DEFAULT_MAX_READER_QUEUE",
    "DEFAULT_PREFIX",
    "DEFAULT_SUBSCRIBE_TIMEOUT",
    "RedisLog",
]

#: Key prefix: every key and channel of a log starts with it.
DEFAULT_PREFIX: Final = "streamwire"
#: Live messages a local reader may have queued before it stops queueing and catches up from
#: ``XRANGE`` instead: a reader 1,024 batches behind costs a page read, never unbounded memory.
DEFAULT_MAX_READER_QUEUE: Final = 1024
#: Seconds to wait for the reply to one command: Redis answers in microseconds, a 1,000-entry
#: page in milliseconds; ten seconds means the server is hung or unreachable.
DEFAULT_COMMAND_TIMEOUT: Final = 10.0
#: Seconds of silence on the subscription before it is PINGed (and again before it is given up
#: when no PONG came): a half-open connection is found within two intervals, not never.
DEFAULT_HEALTH_INTERVAL: Final = 15.0
#: Seconds to wait for Redis to confirm a subscription before a reader gives up (retryable).
DEFAULT_SUBSCRIBE_TIMEOUT: Final = 10.0
#: Entries per ``XRANGE`` page when replaying or catching up: bounds one reply's memory.
_PAGE: Final = 512
#: Bytes written but not yet sent above which a caller waits for the socket (back-pressure).
_HIGH_WATER: Final = 1 << 20
#: Seconds ``aclose`` waits for the subscription task to finish.
_CLOSE_TIMEOUT: Final = 2.0
#: Epochs remembered per ``RedisLog`` (one per recently read stream), oldest forgotten first.
_EPOCH_MEMORY: Final = 10_000

# --------------------------------------------------------------------------------------------
# Lua. Every script starts with the meta hash (KEYS[1]) and the chunk stream (KEYS[2]); errors
# are "SW<kind> <detail>" replies that _map_reply() turns into typed errors. Lua prints integral
# doubles below 1e14 as integers, far above any sequence.

_APPEND: Final = """
local m, xs = KEYS[1], KEYS[2]
local st = redis.call('HGET', m, 'status')
if not st then return redis.error_reply('SWNOTFOUND') end
if st ~= 'active' then return redis.error_reply('SWSTATE ' .. st) end
local n = tonumber(ARGV[4])
local head = redis.call('HINCRBY', m, 'head', n)
local first = head - n + 1
local lens, parts, size = {}, {}, 0
local ls = tonumber(redis.call('HGET', m, 'lstep') or '-1')
local mono = true
for i = 1, n do
  local step, c = ARGV[3 + 2 * i], ARGV[4 + 2 * i]
  redis.call('XADD', xs, (first + i - 1) .. '-0', 's', step, 'c', c)
  local s = tonumber(step)
  if s < ls then mono = false end
  ls = s
  lens[i] = #c
  parts[i] = c
  size = size + #c
end
redis.call('HSET', m, 'lstep', ls)
if not mono then redis.call('HSET', m, 'mono', '0') end
local bytes = redis.call('HINCRBY', m, 'bytes', size)
local maxc, maxb = tonumber(ARGV[2]), tonumber(ARGV[3])
local over = redis.call('XLEN', xs) - maxc
if over > 0 or bytes > maxb then
  local tf, from = 0, '-'
  while over > 0 or bytes > maxb do
    local batch = redis.call('XRANGE', xs, from, '+', 'COUNT', 128)
    if #batch == 0 then break end
    for _, e in ipairs(batch) do
      if over <= 0 and bytes <= maxb then break end
      over = over - 1
      bytes = bytes - #e[2][4]
      tf = tonumber(string.sub(e[1], 1, -3))
      from = '(' .. e[1]
    end
  end
  redis.call('XTRIM', xs, 'MINID', (tf + 1) .. '-0')
  redis.call('HSET', m, 'bytes', bytes, 'tfloor', tf)
end
local ep, tf = redis.call('HGET', m, 'epoch'), redis.call('HGET', m, 'tfloor')
redis.call('PUBLISH', ARGV[1], 'c' .. ep .. ' ' .. first .. ' ' .. table.concat(lens, ',') .. ' '
  .. tf .. '\\n' .. table.concat(parts))
return first
"""

# ARGV: channel, epoch. Returns 1 when created, 0 when it existed.
_CREATE: Final = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'epoch', ARGV[2], 'head', 0, 'status', 'active', 'run', 0,
  'bytes', 0, 'tfloor', 0, 'nrew', 0)
return 1
"""

# ARGV: channel, status, terminal JSON, ttl ms, kind letter ('e' end, 'f' fail).
_FINISH: Final = """
local m, xs = KEYS[1], KEYS[2]
local st = redis.call('HGET', m, 'status')
if not st then return redis.error_reply('SWNOTFOUND') end
if st ~= 'active' then return redis.error_reply('SWSTATE ' .. st) end
redis.call('HSET', m, 'status', ARGV[2], 'term', ARGV[3])
local ttl = tonumber(ARGV[4])
if ttl > 0 then
  redis.call('PEXPIRE', m, ttl)
  redis.call('PEXPIRE', xs, ttl)
end
local ep, head = redis.call('HGET', m, 'epoch'), redis.call('HGET', m, 'head')
redis.call('PUBLISH', ARGV[1], ARGV[5] .. ep .. ' ' .. head .. '\\n' .. ARGV[3])
return 1
"""

# ARGV: channel, step. Removes the chunks of steps after `step` (walking back from the newest
# while steps were appended in order, else scanning all), sets the marker, counts the cleanup,
# stores and publishes the rewound frame. Returns {rewound JSON, cleanup count, epoch}.
_CLEANUP: Final = """
local m, xs = KEYS[1], KEYS[2]
if redis.call('EXISTS', m) == 0 then return redis.error_reply('SWNOTFOUND') end
local step = tonumber(ARGV[2])
local ids, low, freed = {}, 0, 0
local function take(e)
  ids[#ids + 1] = e[1]
  freed = freed + #e[2][4]
  local seq = tonumber(string.sub(e[1], 1, -3))
  if low == 0 or seq < low then low = seq end
end
if redis.call('HGET', m, 'mono') ~= '0' then
  local from = '+'
  while true do
    local batch = redis.call('XREVRANGE', xs, from, '-', 'COUNT', 256)
    local stop = #batch < 256
    for _, e in ipairs(batch) do
      if tonumber(e[2][2]) > step then take(e) else stop = true; break end
      from = '(' .. e[1]
    end
    if stop then break end
  end
else
  local from = '-'
  while true do
    local batch = redis.call('XRANGE', xs, from, '+', 'COUNT', 256)
    for _, e in ipairs(batch) do
      if tonumber(e[2][2]) > step then take(e) end
      from = '(' .. e[1]
    end
    if #batch < 256 then break end
  end
end
for i = 1, #ids, 1000 do
  redis.call('XDEL', xs, unpack(ids, i, math.min(i + 999, #ids)))
end
if freed > 0 then redis.call('HINCRBY', m, 'bytes', -freed) end
local head = redis.call('HGET', m, 'head')
local rw = '{"atStep":' .. ARGV[2] .. ',"atSequence":' .. head
if low > 0 then rw = rw .. ',"minSequence":' .. (low - 1) end
rw = rw .. '}'
local nrew = redis.call('HINCRBY', m, 'nrew', 1)
redis.call('HSET', m, 'marker', ARGV[2], 'rw', rw)
local ep = redis.call('HGET', m, 'epoch')
redis.call('PUBLISH', ARGV[1], 'w' .. ep .. ' ' .. nrew .. '\\n' .. rw)
return {rw, nrew, ep}
"""

# ARGV: channel, mode ('reset' | 'reactivate').
_RESTART: Final = """
local m, xs = KEYS[1], KEYS[2]
local st = redis.call('HGET', m, 'status')
if not st then return redis.error_reply('SWNOTFOUND') end
if ARGV[2] == 'reset' then
  redis.call('DEL', xs)
  redis.call('HSET', m, 'status', 'active', 'run', redis.call('HGET', m, 'head'), 'bytes', 0,
    'tfloor', 0, 'mono', '1', 'lstep', -1)
else
  if st == 'active' then return redis.error_reply('SWSTATE active') end
  redis.call('HSET', m, 'status', 'active')
  redis.call('PERSIST', xs)
end
redis.call('HDEL', m, 'marker', 'term')
redis.call('PERSIST', m)
return 1
"""

# ARGV: channel.
_DELETE: Final = """
local ep = redis.call('HGET', KEYS[1], 'epoch')
if not ep then return redis.error_reply('SWNOTFOUND') end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('PUBLISH', ARGV[1], 'x' .. ep .. ' 0\\n')
return 1
"""

# ARGV: channel (unused), after (exclusive), count. Returns {} for an unknown stream, else
# {meta as HGETALL, lowest retained sequence or 0, {id, chunk, id, chunk, ...}} read atomically.
_PAGE_SCRIPT: Final = """
local meta = redis.call('HGETALL', KEYS[1])
if #meta == 0 then return {} end
local low = 0
local first = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)
if #first > 0 then low = tonumber(string.sub(first[1][1], 1, -3)) end
local out = {}
local count = tonumber(ARGV[3])
if count > 0 then
  local batch = redis.call('XRANGE', KEYS[2], '(' .. ARGV[2] .. '-0', '+', 'COUNT', count)
  for _, e in ipairs(batch) do
    out[#out + 1] = e[1]
    out[#out + 1] = e[2][4]
  end
end
return {meta, low, out}
"""


@final
class _Script:
    """A Lua script with its SHA1, sent with ``EVALSHA`` and loaded on ``NOSCRIPT``."""

    __slots__ = ("sha", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()


_SCRIPTS: Final = {name: _Script(src) for name, src in (
    ("append", _APPEND), ("create", _CREATE), ("finish", _FINISH), ("cleanup", _CLEANUP),
    ("restart", _RESTART), ("delete", _DELETE), ("page", _PAGE_SCRIPT))}

#: Scripts that change nothing (or nothing twice): safe to retry after an unknown outcome.
_READ_ONLY: Final = frozenset({"page", "create"})
_REDIS_DOWN: Final = (redis_errors.ConnectionError, redis_errors.TimeoutError, OSError)
_terminal_json: Final = msgspec.json.Encoder()
_end_decoder: Final = msgspec.json.Decoder(EndFrame)
_fail_decoder: Final = msgspec.json.Decoder(FailFrame)
_rewound_decoder: Final = msgspec.json.Decoder(RewoundFrame)


def _connection(factory: ConnectionPool) -> Connection:
    return cast(Connection, factory.make_connection())  # type: ignore[no-untyped-call]


def _readable(conn: Connection) -> bool:
    """Whether an idle connection has anything to read (it should not: EOF or garbage)."""
    writer: Any = getattr(conn, "_writer", None)
    sock: Any = None if writer is None else writer.transport.get_extra_info("socket")
    if sock is None:
        return True
    try:
        ready, _, _ = select.select([sock.fileno()], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(ready)


def _pack(args: tuple[Any, ...]) -> bytes:
    """One command in RESP (an array of bulk strings); ints and strs as their text."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if type(arg) is bytes else str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


class _NotSent(Exception):
    """The command never left this process (connecting failed): nothing was executed."""


# --------------------------------------------------------------------------------------------
# Command connections


@final
class _Commands:
    """One command connection shared by every caller, auto-pipelined.

    Each call writes its command at once and waits for its reply; a reader task matches replies
    to callers in order (Redis answers in order), so concurrent appends share syscalls instead of
    queueing for a connection. There are no hidden retries (redis-py's client retries after a
    connection error, which could run an append twice): a failure says whether the command left
    this process (``_NotSent`` when it did not).
    """

    def __init__(self, url: str, timeout: float) -> None:
        self.timeout = timeout
        # RESP2: pub/sub messages arrive as replies (RESP3 would route them to push handlers)
        self.factory = ConnectionPool.from_url(  # pyright: ignore[reportUnknownMemberType]
            url, protocol=2, socket_timeout=timeout, socket_connect_timeout=timeout)
        self.url = url
        self._conn: Connection | None = None
        self._waiting: deque[asyncio.Future[Any]] = deque()
        self._deadlines: deque[float] = deque()
        self._watch: asyncio.TimerHandle | None = None
        self._out: list[bytes] = []
        self._writer: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._opening = asyncio.Lock()

    async def _open(self) -> Connection:
        async with self._opening:
            conn = self._conn
            if conn is not None and conn.is_connected and (self._waiting or not _readable(conn)):
                return conn
            # A connection killed while idle (CLIENT KILL, a restart) is readable (EOF) with no
            # reply pending: replace it before sending, so a dead socket is not mistaken for an
            # unknown outcome. asyncio may not have noticed the EOF yet, so ask the socket.
            await self._drop()
            conn = _connection(self.factory)
            try:
                await conn.connect()  # type: ignore[no-untyped-call]
            except _REDIS_DOWN as exc:
                await conn.disconnect(nowait=True)
                raise _NotSent(str(exc)) from exc
            self._conn = conn
            # a fresh line of replies and of unsent bytes for each connection
            self._waiting = deque()
            self._deadlines = deque()
            self._out = []
            self._writer = getattr(conn, "_writer")  # noqa: B009 - redis-py keeps it private
            self._reader = asyncio.get_running_loop().create_task(self._read(conn))
            return conn

    async def call(self, *args: Any) -> Any:
        conn = self._conn
        if conn is None or not conn.is_connected or (not self._waiting and _readable(conn)):
            conn = await self._open()
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[Any] = loop.create_future()
        self._waiting.append(reply)
        deadline = loop.time() + self.timeout
        self._deadlines.append(deadline)
        if self._watch is None:
            self._watch = loop.call_at(deadline, self._check, conn)
        # Commands issued in one event-loop turn go out in one write (auto-pipelining), straight
        # to the stream: redis-py's send wraps every write in wait_for (a task per command). A
        # lost connection shows up in the reader, which fails the reply.
        writer = self._writer
        if len(self._waiting) == 1:
            writer.write(_pack(args))  # the line was idle: no one to batch with, send now
        else:
            out = self._out
            out.append(_pack(args))
            if len(out) == 1:
                loop.call_soon(self._flush, conn)
        try:
            if writer.transport.get_write_buffer_size() > _HIGH_WATER:
                await writer.drain()
            return await reply
        finally:
            reply.cancel()  # no-op once answered; else its slot stays in line, the reader skips it

    def _check(self, conn: Connection) -> None:
        """The watchdog (one timer per connection, not one per command): replies come in order,
        so when the oldest is overdue Redis is hung or unreachable; fail every waiting command
        and drop the connection."""
        self._watch = None
        waiting, deadlines = self._waiting, self._deadlines
        if conn is not self._conn or not waiting:
            return
        loop = asyncio.get_running_loop()
        if deadlines[0] > loop.time():
            self._watch = loop.call_at(deadlines[0], self._check, conn)
            return
        error = redis_errors.TimeoutError(
            f"no reply within command_timeout={self.timeout}s (raise command_timeout= on the "
            "log if Redis is just slow)")
        self._conn = None
        while waiting:
            reply = waiting.popleft()
            deadlines.popleft()
            if not reply.done():
                reply.set_exception(error)
        self._writer.transport.abort()

    def _flush(self, conn: Connection) -> None:
        out, self._out = self._out, []
        if conn is self._conn and out:
            self._writer.write(b"".join(out))

    async def _read(self, conn: Connection) -> None:
        waiting, deadlines = self._waiting, self._deadlines
        try:
            while True:
                try:
                    answer = cast(Any, await conn.read_response(timeout=math.inf))
                except redis_errors.ResponseError as exc:
                    answer = exc
                if not waiting:
                    raise redis_errors.ConnectionError(f"unexpected reply from Redis: {answer!r}")
                reply = waiting.popleft()
                deadlines.popleft()
                if reply.done():
                    continue
                if isinstance(answer, redis_errors.ResponseError):
                    reply.set_exception(answer)
                else:
                    reply.set_result(answer)
        except (Exception, asyncio.CancelledError) as exc:
            error = exc if isinstance(exc, _REDIS_DOWN) else redis_errors.ConnectionError(
                f"the command connection closed ({exc!r})")
            if self._conn is conn:
                self._conn = None
            while waiting:
                reply = waiting.popleft()
                deadlines.popleft()
                if not reply.done():
                    reply.set_exception(error)
            await conn.disconnect(nowait=True)
            if isinstance(exc, asyncio.CancelledError):
                raise

    async def _drop(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None and not reader.done():
            reader.cancel()
            await asyncio.wait({reader}, timeout=_CLOSE_TIMEOUT)
        if self._conn is not None:
            await self._conn.disconnect(nowait=True)
            self._conn = None

    async def aclose(self) -> None:
        await self._drop()


# --------------------------------------------------------------------------------------------
# Live messages and the per-process dispatcher


@final
class _Live:
    """One parsed pub/sub message, shared by every local reader of the stream."""

    __slots__ = ("epoch", "frames", "kind", "number", "trimmed")

    def __init__(self, kind: str, epoch: str, number: int,
                 frames: tuple[StreamFrame, ...], trimmed: int = 0) -> None:
        self.kind = kind        # c chunks, e end, f fail, w rewound, x deleted
        self.epoch = epoch
        self.number = number    # c: first sequence; e/f: head; w: cleanup count
        self.frames = frames
        self.trimmed = trimmed  # c: the highest sequence retention had removed after the append


def _parse_live(data: bytes) -> _Live:
    nl = data.index(b"\n")
    head = data[1:nl].split(b" ")
    kind, epoch, number, body = chr(data[0]), head[0].decode(), int(head[1]), data[nl + 1:]
    frames: tuple[StreamFrame, ...]
    if kind == "c":
        out: list[StreamFrame] = []
        pos = 0
        for i, size in enumerate(head[2].split(b",")):
            end = pos + int(size)
            out.append(ChunkFrame(sequence=number + i, chunk=msgspec.Raw(body[pos:end])))
            pos = end
        return _Live(kind, epoch, number, tuple(out), int(head[3]))
    elif kind == "e":
        frames = (_end_decoder.decode(body),)
    elif kind == "f":
        frames = (_fail_decoder.decode(body),)
    elif kind == "w":
        frames = (_rewound_decoder.decode(body),)
    else:
        frames = ()
    return _Live(kind, epoch, number, frames)


_OVERFLOW: Final = _Live("o", "", 0, ())
_CLOSED: Final = _Live("z", "", 0, ())


@final
class _Sub:
    """One local reader's bounded queue of live messages."""

    __slots__ = ("ended", "error", "overflow", "queue", "wake")

    def __init__(self) -> None:
        self.queue: deque[_Live] = deque()
        self.wake = asyncio.Event()
        self.overflow = False
        self.ended = False
        self.error: BaseException | None = None

    def push(self, item: _Live, limit: int) -> None:
        if self.overflow or self.ended:
            return
        if item.kind == "w":
            # chunks queued before a cleanup may be gone: the reader re-reads them from XRANGE
            # (survivors only), so it never takes a chunk the cleanup removed before it took it
            self.queue = deque(i for i in self.queue if i.kind != "c")
        elif item.trimmed and self.queue and (
                self.queue[0].kind != "c" or self.queue[0].number <= item.trimmed):
            # retention removed chunks this reader has queued but not taken: drop them, so it
            # finds the gap, reads the floor and gets ``truncated`` as on every backend (queued
            # batches are in sequence order, so the head of the queue says whether any is hit)
            trimmed = item.trimmed
            self.queue = deque(i for i in self.queue if i.kind != "c" or i.number > trimmed)
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
        self.queue.append(_CLOSED)
        self.wake.set()

    async def next(self) -> _Live:
        while True:
            if self.error is not None:
                raise self.error
            if self.overflow:
                self.overflow = False
                self.queue.clear()
                return _OVERFLOW
            if self.queue:
                return self.queue.popleft()
            self.wake.clear()
            await self.wake.wait()


@final
class _Topic:
    """The process's subscription to one stream's channel and its local readers."""

    __slots__ = ("ready", "sent", "subs")

    def __init__(self) -> None:
        self.subs: set[_Sub] = set()
        self.sent = False
        self.ready = asyncio.Event()


@final
class _Dispatcher:
    """One pub/sub connection for the whole ``RedisLog``: subscribes a channel while it has local
    readers and fans each message out to them. Any connection error ends every attached reader
    with a retryable ``LogError``; the next reader starts a fresh dispatcher."""

    def __init__(self, factory: ConnectionPool, max_queue: int, health_interval: float) -> None:
        self._factory = factory
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

    def drop(self, channel: bytes, sub: _Sub) -> None:
        topic = self.topics.get(channel)
        if topic is not None:
            topic.subs.discard(sub)
            if not topic.subs:
                del self.topics[channel]
                self._wake.set()

    async def run(self) -> None:
        conn = _connection(self._factory)
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
                await conn.send_packed_command(conn.pack_command("PING"), check_health=False)
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
            if gone:
                await conn.send_packed_command(conn.pack_command("UNSUBSCRIBE", *gone),
                                               check_health=False)
            if new:
                await conn.send_packed_command(conn.pack_command("SUBSCRIBE", *new),
                                               check_health=False)

    async def _listen(self, conn: Connection) -> None:
        max_queue = self._max_queue
        loop = asyncio.get_running_loop()
        while True:
            raw = cast(Any, await conn.read_response(timeout=math.inf))
            self._heard = loop.time()
            if type(raw) is not list or len(cast(list[bytes], raw)) < 2:
                raise LogError(f"unexpected reply on the Redis subscription: {raw!r}")
            reply = cast(list[bytes], raw)
            kind, channel = reply[0], reply[1]
            if kind == b"message":
                topic = self.topics.get(channel)
                if topic is not None and topic.subs:
                    item = _parse_live(reply[2])
                    for sub in topic.subs:
                        sub.push(item, max_queue)
            elif kind == b"subscribe":
                waiting = self._pending.get(channel)
                if waiting:
                    waiting.popleft().ready.set()
                    if not waiting:
                        del self._pending[channel]
            elif kind == b"pong":
                self._ping_at = None


# --------------------------------------------------------------------------------------------
# Pages and the reader's merge state


@final
class _Page:
    """Meta and one ``XRANGE`` page, read atomically."""

    __slots__ = ("entries", "epoch", "floor", "head", "low", "marker", "meta", "nrew", "run",
                 "status", "tfloor")

    status: StreamStatus

    def __init__(self, reply: list[Any]) -> None:
        raw = reply[0]
        meta: dict[bytes, bytes] = dict(zip(raw[::2], raw[1::2], strict=True))
        self.meta = meta
        self.epoch = meta[b"epoch"].decode()
        self.head = int(meta[b"head"])
        self.status = cast(StreamStatus, meta[b"status"].decode())
        self.run = int(meta[b"run"])
        self.tfloor = int(meta[b"tfloor"])
        self.nrew = int(meta[b"nrew"])
        marker = meta.get(b"marker")
        self.marker = None if marker is None else int(marker)
        low = int(reply[1])
        self.low = low or None
        self.floor = low - 1 if low else self.head
        flat: list[bytes] = reply[2]
        self.entries = [(int(flat[i][:-2]), flat[i + 1]) for i in range(0, len(flat), 2)]

    def terminal(self) -> TerminalFrame:
        term = self.meta[b"term"]
        return _fail_decoder.decode(term) if self.status == "failed" else _end_decoder.decode(term)

    def rewound(self) -> RewoundFrame:
        return _rewound_decoder.decode(self.meta[b"rw"])


@final
class _Merge:
    """Where one reader is: everything up to ``covered`` was delivered or is known absent."""

    __slots__ = ("covered", "epoch", "nrew")

    def __init__(self, covered: int, epoch: str, nrew: int) -> None:
        self.covered = covered
        self.epoch = epoch
        self.nrew = nrew

    def apply(self, page: _Page | None) -> tuple[list[StreamFrame], bool, bool]:
        """Frames from a catch-up page, whether the reader is done, whether more pages follow."""
        if page is None:
            return [deleted_frame()], True, False
        if page.epoch != self.epoch or page.tfloor > self.covered:
            # recreated after its data was lost, or retention trimmed what this reader lacks
            return [truncated_frame(page.floor)], True, False
        frames: list[StreamFrame] = []
        rewound = page.rewound() if page.nrew > self.nrew else None
        for seq, chunk in page.entries:
            if seq <= self.covered:
                continue
            if rewound is not None and rewound.at_sequence is not None and (
                    seq > rewound.at_sequence):
                frames.append(rewound)
                self.nrew, rewound = page.nrew, None
            frames.append(ChunkFrame(sequence=seq, chunk=msgspec.Raw(chunk)))
            self.covered = seq
        if len(page.entries) == _PAGE:
            return frames, False, True
        if rewound is not None:
            frames.append(rewound)
            self.nrew = page.nrew
        self.covered = max(self.covered, page.head)
        if page.status in FINISHED:
            frames.append(page.terminal())
            return frames, True, False
        return frames, False, False


# --------------------------------------------------------------------------------------------


@final
class RedisLog:
    """A ``StreamLog`` in Redis (redis-py asyncio): one stream shared by many server processes.

    Args:
        url: a redis-py URL (``redis://host:port/db``, ``rediss://``, ``unix://``).
        prefix: prefix of every key and channel, so several logs can share one database.
        max_chunks_per_stream, max_bytes_per_stream: retention; older chunks are trimmed and the
            floor moves (readers below it get ``truncated``).
        max_chunk_size: one chunk's bytes (``LogLimitError`` above it).
        finished_ttl: seconds a finished stream is kept (0: forever).
        max_reader_queue: live messages queued per local reader before it catches up by ``XRANGE``.
        subscribe_timeout: seconds to wait for Redis to confirm a reader's subscription.
        command_timeout: seconds to wait for the reply to one command (a hung server raises
            ``LogError`` instead of hanging the caller).
        health_interval: seconds of silence after which the subscription is PINGed; no PONG
            within another interval ends the attached readers with a retryable ``LogError``.

    Raises ``LogError`` (chained from the redis error) when Redis cannot be reached.
    """

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        prefix: str = DEFAULT_PREFIX,
        max_chunks_per_stream: int = DEFAULT_MAX_CHUNKS_PER_STREAM,
        max_bytes_per_stream: int = DEFAULT_MAX_BYTES_PER_STREAM,
        max_chunk_size: int = DEFAULT_MAX_CHUNK_SIZE,
        finished_ttl: float = DEFAULT_FINISHED_TTL,
        max_reader_queue: int = DEFAULT_MAX_READER_QUEUE,
        subscribe_timeout: float = DEFAULT_SUBSCRIBE_TIMEOUT,
        command_timeout: float = DEFAULT_COMMAND_TIMEOUT,
        health_interval: float = DEFAULT_HEALTH_INTERVAL,
    ) -> None:
        check_limits(max_chunks_per_stream, max_bytes_per_stream, max_chunk_size, finished_ttl)
        if type(max_reader_queue) is not int or max_reader_queue < 1:
            raise UsageError(f"max_reader_queue must be a positive int, not {max_reader_queue!r}")
        _check_seconds("subscribe_timeout", subscribe_timeout)
        _check_seconds("command_timeout", command_timeout)
        _check_seconds("health_interval", health_interval)
        self.health_interval = health_interval
        self.url = url
        self.prefix = prefix
        self.max_chunks_per_stream = max_chunks_per_stream
        self.max_bytes_per_stream = max_bytes_per_stream
        self.max_chunk_size = max_chunk_size
        self.finished_ttl = finished_ttl
        self.max_reader_queue = max_reader_queue
        self.subscribe_timeout = subscribe_timeout
        self._commands = _Commands(url, command_timeout)
        self._dispatcher: _Dispatcher | None = None
        self._dispatch_task: asyncio.Task[None] | None = None
        self._epochs: OrderedDict[str, str] = OrderedDict()
        self._closed = False
        self._readers: set[_Sub] = set()

    # keys ---------------------------------------------------------------------------------

    def _keys(self, stream_id: str) -> tuple[str, str, str]:
        if type(stream_id) is not str or not stream_id:
            raise UsageError(f"a stream id is a non-empty str, not {stream_id!r}")
        base = f"{self.prefix}:s:{{{stream_id}}}"
        return f"{base}:meta", f"{base}:chunks", f"{base}:live"

    # commands -----------------------------------------------------------------------------

    async def _run(self, name: str, stream_id: str, *args: Any, what: str) -> Any:
        if self._closed:
            raise LogError("the Redis log is closed")
        meta, chunks, channel = self._keys(stream_id)
        script = _SCRIPTS[name]
        try:
            try:
                reply = await self._commands.call(
                    "EVALSHA", script.sha, 2, meta, chunks, channel, *args)
            except redis_errors.NoScriptError:
                # first use on this server (or after a restart / SCRIPT FLUSH): load, then retry
                await self._commands.call("SCRIPT", "LOAD", script.source)
                reply = await self._commands.call(
                    "EVALSHA", script.sha, 2, meta, chunks, channel, *args)
        except _NotSent as exc:
            raise LogError(f"{what} on stream {stream_id!r} failed: cannot reach Redis at "
                           f"{self.url} ({exc}); nothing was changed", retryable=True) from exc
        except redis_errors.ResponseError as exc:
            raise _map_reply(exc, stream_id, what) from None
        except _REDIS_DOWN as exc:
            if name in _READ_ONLY:
                raise LogError(f"{what} on stream {stream_id!r}: Redis at {self.url} failed "
                               f"({exc}); retry", retryable=True) from exc
            raise LogError(
                f"{what} on stream {stream_id!r}: the connection to Redis at {self.url} failed "
                f"after the command was sent ({exc}); it may or may not have been applied "
                "(compare info().head before retrying)") from exc
        return reply

    async def _page(self, stream_id: str, after: int, count: int = _PAGE) -> _Page | None:
        reply = await self._run("page", stream_id, after, count, what="read")
        return _Page(reply) if reply else None

    # the StreamLog API ---------------------------------------------------------------------

    async def create_stream(self, stream_id: str) -> StreamInfo:
        """Create the stream with a fresh epoch if it does not exist (idempotent)."""
        await self._run("create", stream_id, secrets.token_hex(8), what="create")
        return await self.info(stream_id)

    async def info(self, stream_id: str) -> StreamInfo:
        """Head, status, marker, floor, epoch and the persisted end or fail payload."""
        page = await self._page(stream_id, 0, 0)
        if page is None:
            raise StreamNotFoundError(stream_id)
        info = StreamInfo(stream_id=stream_id, status=page.status, head=page.head,
                          floor=page.floor, oldest_retained_sequence=page.low,
                          truncated_at_step=page.marker, epoch=page.epoch)
        if page.status not in FINISHED:
            return info
        term = page.terminal()
        if isinstance(term, EndFrame):
            return msgspec.structs.replace(info, output=term.output, state=term.state,
                                           usage=term.usage)
        assert isinstance(term, FailFrame)
        return msgspec.structs.replace(info, error=term.error, error_detail=term.error_detail,
                                       recoverable=term.recoverable)

    async def append(self, stream_id: str, step: int, chunk: bytes) -> int:
        """Append one chunk (JSON text) at ``step``; return its sequence."""
        return (await self.append_many(stream_id, [(step, chunk)]))[0]

    async def append_many(self, stream_id: str, chunks: Sequence[tuple[int, bytes]]) -> list[int]:
        """Append ``(step, chunk_json)`` pairs in one script (all or none); return sequences."""
        args: list[Any] = []
        for step, chunk in chunks:
            args.append(check_step(step))
            args.append(coerce_chunk(chunk, self.max_chunk_size))
        if not args:
            return []
        n = len(args) // 2
        first = int(await self._run(
            "append", stream_id, self.max_chunks_per_stream, self.max_bytes_per_stream,
            n, *args, what="append"))
        return list(range(first, first + n))

    async def end_stream(
        self,
        stream_id: str,
        status: EndStatus = "completed",
        *,
        output: Any = None,
        state: Any = None,
        usage: dict[str, Any] | None = None,
    ) -> None:
        """Persist the end status and payload; attached readers get ``EndFrame`` and stop."""
        check_end_status(status)
        frame = EndFrame(status=status, output=output, state=state, usage=usage)
        await self._finish(stream_id, status, frame, "e")

    async def fail_stream(
        self,
        stream_id: str,
        error: str,
        *,
        error_detail: dict[str, Any] | None = None,
        recoverable: bool = False,
    ) -> None:
        """Persist a failure; attached readers get ``FailFrame`` and stop."""
        frame = FailFrame(error=error, recoverable=recoverable, error_detail=error_detail)
        await self._finish(stream_id, "failed", frame, "f")

    async def _finish(self, stream_id: str, status: StreamStatus, frame: TerminalFrame,
                      kind: Literal["e", "f"]) -> None:
        try:
            payload = _terminal_json.encode(frame)
        except (TypeError, msgspec.EncodeError) as exc:
            raise UsageError(f"the {status} payload must be JSON-serialisable: {exc}") from None
        ttl = math.ceil(self.finished_ttl * 1000)  # 0 keeps it; a tiny TTL is still one
        await self._run("finish", stream_id, status, payload, ttl, kind,
                        what=f"end ({status})")

    async def cleanup_to_step(self, stream_id: str, step: int) -> RewoundFrame:
        """Remove the chunks of steps after ``step``, set the marker, broadcast ``rewound``."""
        check_step(step)
        reply = await self._run("cleanup", stream_id, step, what="cleanup")
        frame = _rewound_decoder.decode(reply[0])
        # local readers hear of it now, not when the pub/sub copy arrives (deduped by count)
        dispatcher = self._dispatcher
        topic = None if dispatcher is None else dispatcher.topics.get(
            self._keys(stream_id)[2].encode())
        if topic is not None:
            item = _Live("w", reply[2].decode(), int(reply[1]), (frame,))
            for sub in topic.subs:
                sub.push(item, self.max_reader_queue)
        return frame

    async def reset_stream(self, stream_id: str) -> None:
        """Drop every chunk, clear the marker, status active; the counter goes on."""
        await self._run("restart", stream_id, "reset", what="reset")

    async def reactivate_stream(self, stream_id: str) -> None:
        """Make a finished stream active again (keeping its chunks) and clear the marker."""
        await self._run("restart", stream_id, "reactivate", what="reactivate")

    async def delete_stream(self, stream_id: str) -> None:
        """Forget the stream; attached readers (in every process) get a recoverable ``fail``."""
        await self._run("delete", stream_id, what="delete")
        self._epochs.pop(stream_id, None)

    # reading ------------------------------------------------------------------------------

    def read(self, stream_id: str, cursor: int = 0, *,
             epoch: str | None = None) -> AsyncIterator[StreamFrame]:
        """Frames from ``cursor``: replay, ``caught-up``, live, exactly one terminal.

        ``epoch`` (from ``StreamInfo.epoch``) makes a re-attach exact: when the stream was
        recreated since, a reader with ``cursor > 0`` gets ``truncated``. A broken connection to
        Redis raises a retryable ``LogError``; re-attach from the last sequence received.
        """
        self._keys(stream_id)
        return self._read(stream_id, cursor, epoch)

    async def _read(self, stream_id: str, cursor: int,
                    epoch: str | None) -> AsyncIterator[StreamFrame]:
        if type(cursor) is not int or cursor < 0:
            check_cursor(cursor, 0)
        channel = self._keys(stream_id)[2].encode()
        sub, dispatcher = await self._attach(channel)
        try:
            page = await self._page(stream_id, cursor)
            if page is None:
                raise StreamNotFoundError(stream_id)
            known = epoch if epoch is not None else self._epochs.get(stream_id)
            if cursor > 0 and known is not None and known != page.epoch:
                yield truncated_frame(page.floor)
                return
            self._remember(stream_id, page.epoch)
            check_cursor(cursor, page.head)
            if is_truncated(cursor, run_start=page.run, floor=page.floor, marker=page.marker,
                            trimmed=page.tfloor > 0):
                yield truncated_frame(page.floor)
                return
            state = _Merge(cursor, page.epoch, page.nrew)
            # replay: the first page was read after subscribing, so nothing falls in between
            while True:
                frames, done, more = state.apply(page)
                terminal = frames.pop() if done else None
                for frame in frames:
                    yield frame
                if not more:
                    break
                page = await self._page(stream_id, state.covered)
            yield CaughtUpFrame(head=state.covered)
            if terminal is not None:
                yield terminal
                return
            # live
            while True:
                item = await sub.next()
                if item is _CLOSED:
                    yield closed_frame()
                    return
                kind = item.kind
                if item.epoch != state.epoch and item is not _OVERFLOW:
                    kind = "o"  # a different epoch: let a page decide (truncated or deleted)
                if kind == "c" and item.number <= state.covered + 1:
                    for frame in item.frames:
                        if isinstance(frame, ChunkFrame) and frame.sequence > state.covered:
                            state.covered = frame.sequence
                            yield frame
                    continue
                if kind in ("e", "f") and item.number <= state.covered:
                    yield cast(TerminalFrame, item.frames[0])
                    return
                if kind == "w":
                    if item.number <= state.nrew:
                        continue
                    rewound = cast(RewoundFrame, item.frames[0])
                    if rewound.at_sequence is not None and rewound.at_sequence <= state.covered:
                        state.nrew = item.number
                        yield rewound
                        continue
                if kind == "x":
                    yield deleted_frame()
                    return
                # a gap, an overflow or a message that needs the stored state: catch up by pages
                while True:
                    frames, done, more = state.apply(await self._page(stream_id, state.covered))
                    for frame in frames:
                        yield frame
                    if done:
                        return
                    if not more:
                        break
        finally:
            dispatcher.drop(channel, sub)
            self._readers.discard(sub)

    def _remember(self, stream_id: str, epoch: str) -> None:
        self._epochs[stream_id] = epoch
        self._epochs.move_to_end(stream_id)
        if len(self._epochs) > _EPOCH_MEMORY:
            self._epochs.popitem(last=False)

    async def _attach(self, channel: bytes) -> tuple[_Sub, _Dispatcher]:
        if self._closed:
            raise LogError("the Redis log is closed")
        dispatcher = self._dispatcher
        if dispatcher is None or dispatcher.dead is not None:
            # the previous dispatcher (if any) ended; its task finished on its own
            dispatcher = self._dispatcher = _Dispatcher(
                self._commands.factory, self.max_reader_queue, self.health_interval)
            self._dispatch_task = asyncio.get_running_loop().create_task(dispatcher.run())
        topic = dispatcher.want(channel)
        sub = _Sub()
        topic.subs.add(sub)
        self._readers.add(sub)
        try:
            async with asyncio.timeout(self.subscribe_timeout):
                await topic.ready.wait()
        except TimeoutError:
            dispatcher.drop(channel, sub)
            self._readers.discard(sub)
            raise LogError(f"Redis at {self.url} did not confirm a subscription within "
                           f"subscribe_timeout={self.subscribe_timeout}s; raise it or check the "
                           "server", retryable=True) from None
        if sub.error is not None:
            self._readers.discard(sub)
            raise sub.error
        return sub, dispatcher

    async def purge(self) -> int:
        """Delete every key under this log's prefix (tests, tear-down); return how many.

        Attached readers are not told (use ``delete_stream`` for that). Uses ``SCAN``, never
        ``KEYS``, so a large database is not blocked.
        """
        pattern = self.prefix.replace("\\", "\\\\")
        for special in "*?[]":
            pattern = pattern.replace(special, "\\" + special)
        deleted, cursor = 0, b"0"
        try:
            while True:
                cursor, keys = await self._commands.call(
                    "SCAN", cursor, "MATCH", pattern + ":s:*", "COUNT", 1000)
                if keys:
                    deleted += int(await self._commands.call("UNLINK", *keys))
                if cursor in (b"0", 0):
                    return deleted
        except (_NotSent, *_REDIS_DOWN) as exc:
            raise LogError(f"purge of {self.prefix!r} failed: {exc}", retryable=True) from exc

    async def aclose(self) -> None:
        """Close connections; attached readers get a recoverable ``fail`` (log closed)."""
        if self._closed:
            return
        self._closed = True
        for sub in list(self._readers):
            sub.fail(None)
        task, self._dispatch_task = self._dispatch_task, None
        if task is not None:
            task.cancel()
            # bounded: a cancellation swallowed inside redis-py (3.11's asyncio.timeout can turn
            # one into a TimeoutError) must not hang the close
            await asyncio.wait({task}, timeout=_CLOSE_TIMEOUT)
        await self._commands.aclose()


def _check_seconds(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            0 < value < math.inf):
        raise UsageError(f"{name} must be a number of seconds > 0, not {value!r}")


def _map_reply(exc: redis_errors.ResponseError, stream_id: str, what: str) -> LogError:
    """Turn a script's ``SW…`` error reply (or any other Redis error) into a typed error."""
    text = str(exc)
    if text.startswith("SWNOTFOUND"):
        return StreamNotFoundError(stream_id)
    if text.startswith("SWSTATE"):
        status = text.split()[1] if len(text.split()) > 1 else "?"
        return StreamStateError(f"cannot {what} stream {stream_id!r}: its status is {status}")
    error = LogError(f"{what} on stream {stream_id!r}: Redis refused it: {text}")
    error.__cause__ = exc
    return error
