"""``RedisLog``: the stream log in Redis, shared by every server process that points at it.

Strategy (after Centrifugo's Redis engine: a Redis Stream per channel plus pub/sub; the read rules
are the ones every backend shares, ``streamwire.log._reader``):

* **One Lua script per change.** Sequence allocation (``HINCRBY`` on the meta hash), the ``XADD``
  of each chunk with entry id ``<sequence>-0``, retention trimming and the ``PUBLISH`` to live
  readers run in one script, so a chunk is stored and announced atomically, or not at all. Status
  changes (end, fail, cleanup, reset, reactivate, delete) are scripts too. Scripts are sent with
  ``EVALSHA`` and loaded (``SCRIPT LOAD``) only when Redis answers ``NOSCRIPT``.
* **Keys** (``{prefix}`` defaults to ``streamwire``): ``{prefix}:s:{<id>}:meta`` (hash: head,
  status, run start, cleanup marker, retention floor, terminal payload, epoch, the last 1,024
  ``rewound`` markers as fields ``rw:<number>``),
  ``{prefix}:s:{<id>}:chunks`` (Redis Stream, fields ``s`` step and ``c`` chunk) and the pub/sub
  channel ``{prefix}:s:{<id>}:live``. The ``{<id>}`` hash tag keeps a stream's keys in one slot.
  ``{prefix}:s:ids`` (sorted set, score 0) indexes every stream's id for ``list_streams``
  (``ZRANGEBYLEX``: id order), ``{prefix}:s:exp`` scores the finished ones by when they expire;
  the create, finish, restart and delete scripts keep both in step with the stream, atomically.
* **Redis Cluster** (``redis-cluster://HOST:PORT,...``; ``_cluster``): the same keys, so one
  stream (and its run record, ``{prefix}:run:{<id>}``) stays in one slot and every script on it
  is atomic as above; commands are routed by slot on one auto-pipelined connection per master,
  live messages are sharded pub/sub (``SPUBLISH``, one dispatcher per master). The indexes get a
  slot of their own (``_index``, ``_records``) and are updated by a second command, best-effort;
  ``migrate_index`` lists what they miss. docs/guides/redis-cluster.md has the details.
* **One connection set-up per log** (``_commands.Commands``): one command connection shared by
  every caller, auto-pipelined (a burst of callers queues on the socket, none is refused), used
  by the log and by its record store (``record_store``: run records), plus the pub/sub
  connection below. What it needs of redis-py below the client API is in
  ``streamwire._compat.redis``, checked against the installed version.
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
  Finished streams expire after ``finished_ttl`` seconds, paused ones after ``paused_ttl``
  (``PEXPIRE``; 0 keeps them).
* **Writer leases and producers.** The meta field ``lease`` is when the writer's lease lapses, on
  Redis's clock (``TIME`` in the scripts): writes renew it, a write that finds it lapsed is refused
  and runs the lapse script, which fails the stream (``WRITER_GONE``) once and publishes it; a
  reader whose page shows it lapsed runs that script too, and a parked reader reads a page when the
  lease would end. Idempotent producers' state is the meta field ``p:<id>``, checked and written
  inside the append and finish scripts.
* **Faults.** A broken pub/sub connection (``CLIENT KILL``, a restart) ends every attached reader
  with a retryable ``LogError``; re-attaching from the cursor continues with nothing lost or
  repeated. Commands are never retried blindly: an append that fails before it reached Redis raises
  a retryable ``LogError`` ("not stored"); one that failed after it was sent raises a non-retryable
  ``LogError`` saying the outcome is unknown (compare ``info().head``), never a silent loss or a
  duplicate.
"""

from __future__ import annotations

import asyncio
import math
import secrets
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Final, final

import msgspec

from ...errors import LogError, StreamNotFoundError, UsageError
from ...frames import (
    EndFrame,
    EndStatus,
    FailFrame,
    RewoundFrame,
    TerminalFrame,
)
from .. import DEFAULT_LIST_LIMIT, LogCapabilities, Producer, StreamInfo, StreamStatus
from .._common import (
    DEFAULT_DURABLE_FINISHED_TTL,
    DEFAULT_MAX_BYTES_PER_STREAM,
    DEFAULT_MAX_CHUNK_SIZE,
    DEFAULT_MAX_CHUNKS_PER_STREAM,
    DEFAULT_PAUSED_TTL,
    DEFAULT_WRITER_TIMEOUT,
    FINISHED,
    WRITER_GONE,
    check_end_status,
    check_limits,
    check_list,
    check_seconds,
    check_step,
    check_ttl,
    coerce_chunk,
    end_payload,
    fail_payload,
    ttl_for,
)
from .._producers import check_producer
from .._records import RecordStore, check_kind
from ._cluster import CLUSTER_SCHEME, ClusterCommands
from ._commands import CLOSE_TIMEOUT, Commands
from ._index import index_keys, migrate_index, reindex_after
from ._line import Line
from ._live import Dispatcher, Live, Sub, rewound_decoder
from ._reading import RedisReading
from ._records import RedisRecordStore
from ._scripts import LeaseLapsedError, LiveKind, list_ids, run_script
from ._views import PAGE, Page

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
#: What a ``RedisLog`` offers beyond ``StreamLog``: everything.
CAPABILITIES: Final = LogCapabilities(positions=True, listing=True, fanout=True, records=True)
_terminal_json: Final = msgspec.json.Encoder()
_GONE_JSON: Final = msgspec.json.encode(FailFrame(**WRITER_GONE))
#: The page's ``mark`` when the reader's is not known yet (above any marker number).
_NO_MARK: Final = 2**53


@final
class RedisLog(RedisReading):
    """A ``StreamLog`` in Redis (redis-py asyncio): one stream shared by many server processes.

    Args:
        url: a redis-py URL (``redis://host:port/db``, ``rediss://``, ``unix://``), or a Redis
            Cluster's seed nodes, ``redis-cluster://[user:password@]HOST:PORT[,HOST:PORT...]``
            (docs/guides/redis-cluster.md: each stream is atomic in its slot, the listing index
            is updated apart).
        prefix: prefix of every key and channel, so several logs can share one database.
        max_chunks_per_stream: retention; older chunks are trimmed and the floor moves
            (readers below it get ``truncated``).
        max_bytes_per_stream: retention by bytes, likewise.
        max_chunk_size: one chunk's bytes (``LogLimitError`` above it).
        finished_ttl: seconds a finished stream is kept (0: forever); a week by default, the
            runs service's record retention, so a run's reply lasts as long as its record.
        paused_ttl: seconds a paused stream is kept (0, the default: until it is reactivated).
        max_reader_queue: live messages queued per local reader before it catches up by ``XRANGE``.
        subscribe_timeout: seconds to wait for Redis to confirm a reader's subscription.
        command_timeout: seconds to wait for the reply to one command (a hung server raises
            ``LogError`` instead of hanging the caller).
        health_interval: seconds of silence after which the subscription is PINGed; no PONG
            within another interval ends the attached readers with a retryable ``LogError``.
        writer_timeout: seconds a writer's lease lasts without an append or ``keepalive`` (on
            Redis's clock); an active stream whose lease lapsed ends with a recoverable ``fail``
            (``WRITER_GONE``), written by the first process that notices.

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
        finished_ttl: float = DEFAULT_DURABLE_FINISHED_TTL,
        paused_ttl: float = DEFAULT_PAUSED_TTL,
        max_reader_queue: int = DEFAULT_MAX_READER_QUEUE,
        subscribe_timeout: float = DEFAULT_SUBSCRIBE_TIMEOUT,
        command_timeout: float = DEFAULT_COMMAND_TIMEOUT,
        health_interval: float = DEFAULT_HEALTH_INTERVAL,
        writer_timeout: float = DEFAULT_WRITER_TIMEOUT,
    ) -> None:
        check_limits(max_chunks_per_stream, max_bytes_per_stream, max_chunk_size, finished_ttl)
        if type(max_reader_queue) is not int or max_reader_queue < 1:
            raise UsageError(f"max_reader_queue must be a positive int, not {max_reader_queue!r}")
        check_seconds("subscribe_timeout", subscribe_timeout)
        check_seconds("command_timeout", command_timeout)
        check_seconds("health_interval", health_interval)
        check_seconds("writer_timeout", writer_timeout)
        self.writer_timeout = writer_timeout
        self._lease_ms = max(1, math.ceil(writer_timeout * 1000))
        self.health_interval = health_interval
        self.url = url
        self.prefix = prefix
        self._commands: Line = (
            ClusterCommands(url, command_timeout) if url.startswith(CLUSTER_SCHEME)
            else Commands(url, command_timeout))
        #: True on a Redis Cluster (``redis-cluster://``).
        self.cluster = self._commands.cluster
        self._index = index_keys(prefix, self.cluster)  # under {prefix}:s: (purge takes them)
        self.max_chunks_per_stream = max_chunks_per_stream
        self.max_bytes_per_stream = max_bytes_per_stream
        self.max_chunk_size = max_chunk_size
        self.finished_ttl = finished_ttl
        self.paused_ttl = check_ttl("paused_ttl", paused_ttl)
        self.max_reader_queue = max_reader_queue
        self.subscribe_timeout = subscribe_timeout
        self._dispatchers: dict[str, Dispatcher] = {}
        self._dispatch_tasks: set[asyncio.Task[None]] = set()
        self._epochs: OrderedDict[str, str] = OrderedDict()
        self._join_pages = OrderedDict()
        self._closed = False
        self._readers: set[Sub] = set()

    @property
    def capabilities(self) -> LogCapabilities:
        """Positions, listing, fan-out and a record store (``LogCapabilities``)."""
        return CAPABILITIES

    def record_store(self, kind: str) -> RecordStore:
        """The store of ``kind`` records on this log's server, under its prefix, sent on its
        command connection (one socket, auto-pipelined: bursts queue, none is refused)."""
        return RedisRecordStore(self._commands, self.prefix, check_kind(kind))

    # keys ---------------------------------------------------------------------------------

    def _keys(self, stream_id: str) -> tuple[str, str, str]:
        if type(stream_id) is not str or not stream_id:
            raise UsageError(f"a stream id is a non-empty str, not {stream_id!r}")
        if self.cluster and stream_id[0] == "}":
            # "{}...": an empty hash tag, which would scatter the stream's keys over slots
            raise UsageError(f"on a Redis Cluster a stream id cannot start with '}}': "
                             f"{stream_id!r}")
        base = f"{self.prefix}:s:{{{stream_id}}}"
        return f"{base}:meta", f"{base}:chunks", f"{base}:live"

    # commands -----------------------------------------------------------------------------

    async def _run(self, name: str, stream_id: str, *args: Any, what: str,
                   producer_id: str = "") -> Any:
        if self._closed:
            raise LogError("the Redis log is closed")
        try:
            reply = await run_script(self._commands, name, self._keys(stream_id), args,
                                     index=() if self.cluster else self._index,
                                     stream_id=stream_id, what=what, producer_id=producer_id)
        except LeaseLapsedError:
            await self._lapse(stream_id)  # this process noticed: it writes the failure
            raise
        if self.cluster:
            await reindex_after(self._commands, self._index, name, stream_id, reply, args)
        return reply

    async def _lapse(self, stream_id: str) -> None:
        """Fail the stream if its writer's lease lapsed (once, whoever runs it first)."""
        ttl = math.ceil(self.finished_ttl * 1000)
        await self._run("lapse", stream_id, ttl, _GONE_JSON, what="fail (writer gone)")

    async def _page(self, stream_id: str, after: int, count: int = PAGE,
                    mark: int = _NO_MARK) -> Page | None:
        reply = await self._run("page", stream_id, after, count, mark, what="read")
        page = Page(reply, mark) if reply else None
        if page is not None and page.lease_left is not None and page.lease_left <= 0:
            await self._lapse(stream_id)  # the writer's lease lapsed: read what that made
            reply = await self._run("page", stream_id, after, count, mark, what="read")
            page = Page(reply, mark) if reply else None
        return page

    # the StreamLog API ---------------------------------------------------------------------

    async def create_stream(self, stream_id: str) -> StreamInfo:
        """Create the stream with a fresh epoch if it does not exist (idempotent)."""
        await self._run("create", stream_id, secrets.token_hex(8), self._lease_ms,
                        what="create")
        return await self.info(stream_id)

    async def info(self, stream_id: str) -> StreamInfo:
        """Head, status, marker, floor, epoch and the persisted end or fail payload."""
        page = await self._page(stream_id, 0, 0)
        if page is None:
            raise StreamNotFoundError(stream_id)
        info = StreamInfo(stream_id=stream_id, status=page.status, head=page.head,
                          floor=page.floor(), oldest_retained_sequence=page.low,
                          truncated_at_step=page.truncated_at_step, epoch=page.epoch)
        if page.status not in FINISHED:
            return info
        term = page.terminal()
        if isinstance(term, EndFrame):
            return msgspec.structs.replace(info, output=term.output, state=term.state,
                                           usage=term.usage)
        assert isinstance(term, FailFrame)
        return msgspec.structs.replace(info, error=term.error, error_detail=term.error_detail,
                                       recoverable=term.recoverable)

    async def list_streams(self, *, after: str = "",
                           limit: int = DEFAULT_LIST_LIMIT) -> list[StreamInfo]:
        """The infos of at most ``limit`` streams with an id greater than ``after``, in id order
        (the index's byte order); expired ones are never listed."""
        check_list(after, limit)
        if self._closed:
            raise LogError("the Redis log is closed")
        found: list[StreamInfo] = []
        while len(found) < limit:
            want = limit - len(found)
            ids = await list_ids(self._commands, self._index, after, want)
            # one pipelined round trip for the page's infos (the command connection batches them)
            infos = await asyncio.gather(*[self._listed_info(sid) for sid in ids])
            found += [info for info in infos if info is not None]
            if len(ids) < want:
                break
            after = ids[-1]
        return found

    async def _listed_info(self, stream_id: str) -> StreamInfo | None:
        """A listed stream's info, or None when it is gone (expired or evicted since the index
        was read): then it leaves the index."""
        try:
            return await self.info(stream_id)
        except StreamNotFoundError:
            await self._run("unlist", stream_id, what="unlist")
            return None

    async def append(self, stream_id: str, step: int, chunk: bytes, *,
                     producer: Producer | None = None) -> int:
        """Append one chunk (JSON text) at ``step``; return its sequence."""
        return (await self.append_many(stream_id, [(step, chunk)], producer=producer))[0]

    async def append_many(self, stream_id: str, chunks: Sequence[tuple[int, bytes]], *,
                          producer: Producer | None = None) -> list[int]:
        """Append ``(step, chunk_json)`` pairs in one script (all or none); return sequences."""
        args: list[Any] = []
        for step, chunk in chunks:
            args.append(check_step(step))
            args.append(coerce_chunk(chunk, self.max_chunk_size))
        if not args and producer is None:
            return []
        n = len(args) // 2
        reply = await self._run(
            "append", stream_id, self.max_chunks_per_stream, self.max_bytes_per_stream,
            n, *args, *_producer_args(producer), self._lease_ms, what="append",
            producer_id="" if producer is None else producer.id)
        if type(reply) is list:  # a producer's repeated request: the original result
            first, n = _pair(reply)
        else:
            first = int(reply)
        return list(range(first, first + n))

    async def end_stream(
        self,
        stream_id: str,
        status: EndStatus = "completed",
        *,
        output: Any = None,
        state: Any = None,
        usage: dict[str, Any] | None = None,
        producer: Producer | None = None,
    ) -> None:
        """Persist the end status and payload; attached readers get ``EndFrame`` and stop."""
        check_end_status(status)
        frame = EndFrame(status=status, **end_payload(output, state, usage))
        await self._finish(stream_id, status, frame, LiveKind.END, producer)

    async def fail_stream(
        self,
        stream_id: str,
        error: str,
        *,
        error_detail: dict[str, Any] | None = None,
        recoverable: bool = False,
        producer: Producer | None = None,
    ) -> None:
        """Persist a failure; attached readers get ``FailFrame`` and stop."""
        frame = FailFrame(**fail_payload(error, error_detail, recoverable))
        await self._finish(stream_id, "failed", frame, LiveKind.FAIL, producer)

    async def _finish(self, stream_id: str, status: StreamStatus, frame: TerminalFrame,
                      kind: LiveKind, producer: Producer | None) -> None:
        try:
            payload = _terminal_json.encode(frame)
        except (TypeError, msgspec.EncodeError) as exc:
            raise UsageError(f"the {status} payload must be JSON-serialisable: {exc}") from None
        # 0 keeps it; a tiny TTL is still one
        ttl = math.ceil(ttl_for(status, self.finished_ttl, self.paused_ttl) * 1000)
        await self._run("finish", stream_id, status, payload, ttl, kind.value,
                        *_producer_args(producer), what=f"end ({status})",
                        producer_id="" if producer is None else producer.id)

    async def cleanup_to_step(self, stream_id: str, step: int) -> RewoundFrame:
        """Remove the chunks of steps after ``step``, set the marker, broadcast ``rewound``."""
        check_step(step)
        reply = await self._run("cleanup", stream_id, step, what="cleanup")
        frame = rewound_decoder.decode(reply[0])
        # local readers hear of it now, not when the pub/sub copy arrives (deduped by count)
        channel = self._keys(stream_id)[2].encode()
        for dispatcher in self._dispatchers.values():
            topic = dispatcher.topics.get(channel)
            if topic is None:
                continue
            item = Live(LiveKind.REWOUND, reply[2].decode(), int(reply[1]), (frame,))
            for sub in topic.subs:
                sub.push(item, self.max_reader_queue)
        return frame

    async def reset_stream(self, stream_id: str) -> None:
        """Drop every chunk, clear the marker, status active; the counter goes on."""
        await self._run("restart", stream_id, "reset", self._lease_ms, what="reset")

    async def reactivate_stream(self, stream_id: str) -> None:
        """Make a finished stream active again (keeping its chunks) and clear the marker."""
        await self._run("restart", stream_id, "reactivate", self._lease_ms,
                        what="reactivate")

    async def keepalive(self, stream_id: str) -> None:
        """Renew the writer's lease of an active stream (``StreamStateError`` once it is not,
        e.g. after it lapsed)."""
        await self._run("keepalive", stream_id, self._lease_ms, what="keepalive")

    async def delete_stream(self, stream_id: str) -> None:
        """Forget the stream; attached readers (in every process) get a recoverable ``fail``."""
        await self._run("delete", stream_id, what="delete")
        self._epochs.pop(stream_id, None)

    async def purge(self) -> int:
        """Delete every key under this log's prefix (tests, tear-down); return how many.

        Attached readers are not told (use ``delete_stream`` for that). Uses ``SCAN``, never
        ``KEYS``, so a large database is not blocked.
        """
        return await self._commands.purge(self.prefix + ":s:")

    async def migrate_index(self) -> int:
        """List the streams under this log's prefix that ``list_streams`` misses: streams written
        before the index existed, or (on a cluster) whose index update was lost. Scans the
        streams' keys (``SCAN``, every master of a cluster); returns how many were added.
        Idempotent, safe while the log is in use (docs/guides/redis-cluster.md)."""
        if self._closed:
            raise LogError("the Redis log is closed")
        return await migrate_index(self._commands, self.prefix, self._index)

    async def aclose(self) -> None:
        """Close connections; attached readers get a recoverable ``fail`` (log closed)."""
        if self._closed:
            return
        self._closed = True
        for sub in list(self._readers):
            sub.fail(None)
        tasks = set(self._dispatch_tasks)
        self._dispatchers.clear()
        for task in tasks:
            task.cancel()
        if tasks:
            # bounded: a cancellation swallowed inside redis-py (3.11's asyncio.timeout can turn
            # one into a TimeoutError) must not hang the close
            await asyncio.wait(tasks, timeout=CLOSE_TIMEOUT)
        await self._commands.aclose()


def _producer_args(producer: Producer | None) -> tuple[str, int, int]:
    """The scripts' three producer arguments ('' for none), checked."""
    if producer is None:
        return "", 0, 0
    check_producer(producer)
    return producer.id, producer.epoch, producer.seq


def _pair(reply: Any) -> tuple[int, int]:
    return int(reply[0]), int(reply[1])
