"""``MemoryLog``: the default ``StreamLog``, in this process's memory.

Theory of operation: each stream is one list of ``(sequence, step, chunk)`` tuples, ordered by
sequence (an append always adds the highest one), plus its status and payload. Every method
changes the stream with no ``await`` before the change is whole, so on one event loop each change
is atomic: sequences are gap-free under any number of concurrent appenders without a lock.

A reader is pull-based: each time it wakes it takes the next batch of retained chunks above its
position (a ``bisect``), by the read rules every backend shares (``streamwire.log._reader``; the
stream's state is in ``streamwire.log.memory._stream``). The log buffers nothing per reader, and
an append never waits on one: it wakes the readers parked on the stream (no polling), and hands
the new chunks to the stream server's hubs in its own task (``ReadPosition.push``). ``rewound``
markers are kept per stream (bounded) with the head at the time, so each reader delivers them
exactly where they happened, and only to readers attached before the cleanup.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from functools import partial
from typing import Any, Final, final

import anyio
import msgspec

from ...errors import LogError, StreamNotFoundError, StreamStateError, UsageError
from ...frames import ChunkFrame, EndStatus, RewoundFrame, StreamFrame, TruncatedFrame
from .. import DEFAULT_LIST_LIMIT, LogCapabilities, Producer, StreamInfo, StreamStatus
from .._common import (
    DEFAULT_FINISHED_TTL,
    DEFAULT_MAX_BYTES_PER_STREAM,
    DEFAULT_MAX_CHUNK_SIZE,
    DEFAULT_MAX_CHUNKS_PER_STREAM,
    DEFAULT_PAUSED_TTL,
    DEFAULT_WRITER_TIMEOUT,
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
    json_copy,
    rewound_frame,
)
from .._producers import admit, check_producer, record
from .._reader import Joined, ReaderState, ReadPosition, attach, next_frames, settled
from .._records import RecordStore, check_kind
from ._expiry import Expiries
from ._records import MemoryRecordStore
from ._stream import Stream, asyncio_loop

__all__ = ["MemoryLog"]

#: ``rewound`` markers kept per stream while readers are attached; a reader that has not taken
#: this many markers (thousands of cleanups while it sat still) gets a recoverable ``fail``.
MAX_PENDING_MARKERS: Final = 1024

#: What a ``MemoryLog`` offers beyond ``StreamLog``: everything.
CAPABILITIES: Final = LogCapabilities(positions=True, listing=True, fanout=True, records=True)

_validate_json = msgspec.json.Decoder(msgspec.Raw).decode
_monotonic = time.monotonic


@final
class MemoryLog:
    """A ``StreamLog`` in memory: fast, shared by the tasks of one process, lost on exit.

    Args:
        max_chunks_per_stream: retained chunks per stream; past it the oldest are trimmed and a
            reader whose cursor is under the new floor gets ``truncated``.
        max_bytes_per_stream: retained chunk bytes per stream, trimmed the same way.
        max_chunk_size: the largest chunk ``append`` accepts (``LogLimitError`` past it).
        finished_ttl: seconds a finished stream is kept before it is forgotten (0: forever).
        paused_ttl: seconds a paused stream is kept (0, the default: until it is reactivated).
        writer_timeout: seconds a writer's lease lasts without an append or ``keepalive``; an
            active stream whose lease lapsed ends with a recoverable ``fail`` (``WRITER_GONE``).
    """

    def __init__(
        self,
        *,
        max_chunks_per_stream: int = DEFAULT_MAX_CHUNKS_PER_STREAM,
        max_bytes_per_stream: int = DEFAULT_MAX_BYTES_PER_STREAM,
        max_chunk_size: int = DEFAULT_MAX_CHUNK_SIZE,
        finished_ttl: float = DEFAULT_FINISHED_TTL,
        paused_ttl: float = DEFAULT_PAUSED_TTL,
        writer_timeout: float = DEFAULT_WRITER_TIMEOUT,
    ) -> None:
        check_limits(max_chunks_per_stream, max_bytes_per_stream, max_chunk_size, finished_ttl)
        check_seconds("writer_timeout", writer_timeout)
        self.writer_timeout = float(writer_timeout)
        self.max_chunks_per_stream = max_chunks_per_stream
        self.max_bytes_per_stream = max_bytes_per_stream
        self.max_chunk_size = max_chunk_size
        self.finished_ttl = float(finished_ttl)
        self.paused_ttl = check_ttl("paused_ttl", paused_ttl)
        self._streams: dict[str, Stream] = {}
        self._expiries = Expiries(self.finished_ttl, self.paused_ttl)
        self._epoch_prefix = uuid.uuid4().hex[:12]
        self._epochs = itertools.count(1)
        self._closed = False
        self._record_stores: dict[str, MemoryRecordStore] = {}

    @property
    def capabilities(self) -> LogCapabilities:
        """Positions, listing, fan-out and a record store (``LogCapabilities``)."""
        return CAPABILITIES

    def record_store(self, kind: str) -> RecordStore:
        """The store of ``kind`` records beside the streams, in this process's memory (one per
        kind and log: every caller shares it)."""
        return self._record_stores.setdefault(check_kind(kind), MemoryRecordStore())

    # -- lookup -----------------------------------------------------------------------------

    def _get(self, stream_id: str) -> Stream:
        st = self._streams.get(stream_id)
        if st is None:
            if self._closed:
                raise LogError("the stream log is closed")
            raise StreamNotFoundError(stream_id)
        if st.expires_at is not None and st.expires_at <= time.monotonic():
            self._forget(st)
            raise StreamNotFoundError(stream_id)
        if st.status == "active" and st.lease_until <= time.monotonic():
            self._lapse(st)
        return st

    def _lapse(self, st: Stream) -> None:
        """The writer's lease lapsed: the stream fails (recoverable, WRITER_GONE)."""
        self._finish(st, "failed", json_copy(WRITER_GONE, "WRITER_GONE"))

    def _lease_due(self, st: Stream) -> None:
        """A parked reader's timer (asyncio): fail the stream if its lease lapsed, else look
        again when the renewed lease ends."""
        st.lease_timer = None
        if st.status != "active" or st.deleted or self._closed:
            return
        left = st.lease_until - time.monotonic()
        if left <= 0:
            self._lapse(st)
        elif st.readers:
            st.lease_timer = asyncio.get_running_loop().call_later(left, self._lease_due, st)

    def _active(self, stream_id: str) -> Stream:
        st = self._get(stream_id)
        if st.status != "active":
            raise StreamStateError(f"stream {stream_id!r} is {st.status}, not active: "
                                   "reset_stream or reactivate_stream starts it again")
        return st

    def _forget(self, st: Stream) -> None:
        self._streams.pop(st.stream_id, None)
        self._expiries.discard(st.stream_id)
        st.deleted = True
        st.version += 1
        st.notify()

    def _sweep(self) -> None:
        for stream_id in self._expiries.due():
            st = self._streams.get(stream_id)
            if st is not None:
                self._forget(st)
            else:
                self._expiries.discard(stream_id)

    def _info(self, st: Stream) -> StreamInfo:
        has = st.start < len(st.entries)
        return StreamInfo(
            stream_id=st.stream_id, status=st.status, head=st.head, floor=st.floor(),
            oldest_retained_sequence=st.entries[st.start][0] if has else None,
            truncated_at_step=st.truncated_at_step, epoch=st.epoch, **st.payload)

    # -- writes -----------------------------------------------------------------------------

    async def create_stream(self, stream_id: str) -> StreamInfo:
        """Create the stream if it does not exist (idempotent); return its info."""
        if self._closed:
            raise LogError("the stream log is closed")
        if type(stream_id) is not str or not stream_id:
            raise UsageError(f"a stream id is a non-empty str, not {stream_id!r}")
        self._sweep()
        st = self._streams.get(stream_id)
        if st is None:
            st = self._streams[stream_id] = Stream(
                stream_id, f"{self._epoch_prefix}-{next(self._epochs)}",
                self.max_chunks_per_stream)
            st.lease_until = time.monotonic() + self.writer_timeout
        return self._info(st)

    async def info(self, stream_id: str) -> StreamInfo:
        """Head, status, marker, floor and the persisted end or fail payload."""
        return self._info(self._get(stream_id))

    async def list_streams(self, *, after: str = "",
                           limit: int = DEFAULT_LIST_LIMIT) -> list[StreamInfo]:
        """The infos of at most ``limit`` streams with an id greater than ``after``, in id order
        (expired ones are forgotten first, so never listed)."""
        check_list(after, limit)
        if self._closed:
            raise LogError("the stream log is closed")
        self._sweep()
        ids = heapq.nsmallest(limit, [sid for sid in self._streams if sid > after])
        return [self._info(self._get(sid)) for sid in ids]

    async def append(self, stream_id: str, step: int, chunk: bytes, *,
                     producer: Producer | None = None) -> int:
        """Append one chunk (its JSON text) produced at ``step``; return its sequence."""
        if producer is not None:
            return (await self.append_many(stream_id, [(step, chunk)], producer=producer))[0]
        # the hot path, kept flat: an active stream never has an expiry to check
        st = self._streams.get(stream_id)
        now = _monotonic()
        if st is None or st.status != "active" or st.lease_until <= now:
            st = self._active(stream_id)
        st.lease_until = now + self.writer_timeout
        if type(step) is not int or step < 0 or step >> 53:  # >> 53: above 2**53 - 1
            check_step(step)
        if type(chunk) is not bytes or len(chunk) > self.max_chunk_size:
            chunk = coerce_chunk(chunk, self.max_chunk_size)
        else:
            try:
                _validate_json(chunk)
            except msgspec.DecodeError:
                coerce_chunk(chunk, self.max_chunk_size)  # raises the PayloadError
        seq = st.head = st.head + 1
        entries = st.entries
        entries.append((seq, step, chunk))
        st.nbytes += len(chunk)
        if len(entries) > st.trim_at or st.nbytes > self.max_bytes_per_stream:
            self._trim(st)
        if st.waiters or st.wake is not None or st.taps:
            await st.appended(self._closed)
        return seq

    async def append_many(self, stream_id: str, chunks: Sequence[tuple[int, bytes]], *,
                          producer: Producer | None = None) -> list[int]:
        """Append ``(step, chunk_json)`` pairs atomically (all or none); return their sequences."""
        if producer is not None:
            st = self._get(stream_id)
            repeat = self._admit(st, producer)
            if repeat is not None:
                return list(range(repeat[0], repeat[0] + repeat[1]))
        st = self._active(stream_id)
        st.lease_until = time.monotonic() + self.writer_timeout
        limit = self.max_chunk_size
        first = seq = st.head + 1
        new: list[tuple[int, int, bytes]] = []
        size = 0
        for step, chunk in chunks:  # check everything before changing anything
            if type(step) is not int or step < 0 or step >> 53:  # above 2**53 - 1
                check_step(step)
            if type(chunk) is not bytes or len(chunk) > limit:
                chunk = coerce_chunk(chunk, limit)
            else:
                try:
                    _validate_json(chunk)
                except msgspec.DecodeError:
                    coerce_chunk(chunk, limit)  # raises the PayloadError
            new.append((seq, step, chunk))
            seq += 1
            size += len(chunk)
        st.head = seq - 1
        entries = st.entries
        entries.extend(new)
        st.nbytes += size
        if len(entries) > st.trim_at or st.nbytes > self.max_bytes_per_stream:
            self._trim(st)
        if producer is not None:
            st.producers[producer.id] = record(st.producers.get(producer.id), producer, first,
                                               seq - first)
        await st.appended(self._closed)
        return list(range(first, seq))

    @staticmethod
    def _admit(st: Stream, producer: Producer) -> tuple[int, int] | None:
        """The shared producer rule: None to apply the call, or the repeated one's result."""
        return admit(st.producers.get(check_producer(producer).id), producer)

    def _trim(self, st: Stream) -> None:
        """Retention: drop the oldest chunks until both limits hold; the floor moves up."""
        entries = st.entries
        start = st.start
        end = len(entries)
        while end - start > self.max_chunks_per_stream or st.nbytes > self.max_bytes_per_stream:
            st.nbytes -= len(entries[start][2])
            start += 1
        if start > st.start:
            st.trimmed = True
            st.lost_above = entries[start - 1][0]
            st.start = start
            st.trim_at = st.start + st.max_chunks
        if start > 1024 and start * 2 > end:
            del entries[:start]
            st.start = 0
            st.trim_at = st.start + st.max_chunks
            st.version += 1

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
        payload = end_payload(output, state, usage)
        if producer is not None and self._admit(self._get(stream_id), producer) is not None:
            return
        self._finish(self._active(stream_id), status, payload, producer)

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
        payload = fail_payload(error, error_detail, recoverable)
        if producer is not None and self._admit(self._get(stream_id), producer) is not None:
            return
        self._finish(self._active(stream_id), "failed", payload, producer)

    def _finish(self, st: Stream, status: StreamStatus, payload: dict[str, Any],
                producer: Producer | None = None) -> None:
        if producer is not None:
            st.producers[producer.id] = record(st.producers.get(producer.id), producer,
                                               st.head + 1, 0)
        st.status = status
        st.payload = payload
        st.expires_at = self._expiries.add(st.stream_id, status)  # None: kept
        st.notify()

    async def keepalive(self, stream_id: str) -> None:
        """Renew the writer's lease of an active stream (``StreamStateError`` once it is not)."""
        self._active(stream_id).lease_until = time.monotonic() + self.writer_timeout

    def _restart(self, st: Stream) -> None:
        st.lease_until = time.monotonic() + self.writer_timeout
        st.status = "active"
        st.payload = {}
        st.truncated_at_step = None
        st.expires_at = None
        self._expiries.discard(st.stream_id)

    async def cleanup_to_step(self, stream_id: str, step: int) -> RewoundFrame:
        """Remove the chunks of steps after ``step``, set the cleanup marker, and broadcast the
        returned ``RewoundFrame`` to every attached reader (also when nothing was removed)."""
        st = self._get(stream_id)
        check_step(step)
        live = st.entries[st.start:]
        kept = [entry for entry in live if entry[1] <= step]
        removed_min = None
        if len(kept) != len(live):
            removed_min = next(entry[0] for entry in live if entry[1] > step)
            st.entries = kept
            st.start = 0
            st.trim_at = st.start + st.max_chunks
            st.nbytes = sum([len(entry[2]) for entry in kept])
        frame = rewound_frame(step, st.head, removed_min)
        st.truncated_at_step = step
        st.version += 1
        if st.readers:
            if len(st.markers) >= MAX_PENDING_MARKERS:
                del st.markers[0]
                st.marker_base += 1
            st.markers.append(frame)
        else:  # nobody attached before this cleanup can still be owed a marker
            st.marker_base += len(st.markers) + 1
            st.markers.clear()
        st.notify()
        return frame

    async def reset_stream(self, stream_id: str) -> None:
        """Start a new run: drop every chunk, clear the marker, status active; the counter goes on."""
        st = self._get(stream_id)
        st.entries = []
        st.start = 0
        st.trim_at = st.start + st.max_chunks
        st.nbytes = 0
        st.run_start = st.head
        st.trimmed = False
        st.lost_above = 0
        st.version += 1
        self._restart(st)
        st.notify()

    async def reactivate_stream(self, stream_id: str) -> None:
        """Make a finished stream active again (keeping its chunks) and clear the marker.

        Raises ``StreamStateError`` when the stream is already active.
        """
        st = self._get(stream_id)
        if st.status == "active":
            raise StreamStateError(f"stream {stream_id!r} is already active")
        self._restart(st)
        st.version += 1
        st.notify()

    async def delete_stream(self, stream_id: str) -> None:
        """Forget the stream; attached readers get a recoverable ``FailFrame``."""
        self._forget(self._get(stream_id))

    # -- reads ------------------------------------------------------------------------------

    async def read(self, stream_id: str, cursor: int = 0, *,
                   position: ReadPosition | None = None) -> AsyncIterator[StreamFrame]:
        """Frames for one reader from ``cursor``: replay, caught-up, live, exactly one terminal.

        Raises (on the first ``__anext__``) ``StreamNotFoundError``, ``UsageError`` for a negative
        cursor and ``StreamStateError`` for a cursor above the head. ``position`` is kept up to
        date with the reader's (the stream server shares one reader among its connections)."""
        st = self._get(stream_id)
        reader = attach(st, cursor)
        if isinstance(reader, TruncatedFrame):
            yield reader
            return
        if position is not None:  # (join: another reader joins this one, one look at ``st``)
            position.state, position.join = reader, partial(self._join, stream_id, reader)
        loop = asyncio_loop()
        st.readers += 1
        try:
            while True:
                step = next_frames(reader, st, self._closed)
                assert step is not None  # this view holds every range
                frames, done = step
                if frames:
                    version, last = st.version, frames[-1]
                    if position is not None:
                        position.last = last
                    if position is not None and position.paged:  # taken whole, in one step
                        position.page = frames
                        yield last
                    else:
                        for frame in frames:
                            yield frame
                            if st.version != version:
                                # a cleanup, reset or delete meanwhile: the rest may be stale
                                if isinstance(frame, ChunkFrame):
                                    reader.pos = frame.sequence
                                last = frame
                                break
                    if done and last is frames[-1]:
                        return
                    if st.version != version or not settled(reader, st, self._closed):
                        continue  # else park now: all delivered and nothing came since
                if loop is not None:
                    if st.lease_timer is None and st.status == "active":
                        st.lease_timer = loop.call_later(
                            st.lease_until - time.monotonic(), self._lease_due, st)
                    fut = st.park(loop, position)
                    try:
                        await fut
                    except BaseException:
                        st.unpark(fut)
                        raise
                    continue
                with anyio.move_on_after(st.lease_until - time.monotonic()):
                    await st.wait_elsewhere()
                if st.status == "active" and st.lease_until <= time.monotonic():
                    self._lapse(st)
        finally:
            st.readers -= 1

    async def _join(self, stream_id: str, like: ReaderState, cursor: int) -> Joined | None:
        return self._get(stream_id).join(cursor, like, self._closed)

    async def aclose(self) -> None:
        """Forget every stream and end every reader with a recoverable ``FailFrame``."""
        if self._closed:
            return
        self._closed = True
        for st in self._streams.values():
            st.version += 1
            st.notify()
        self._streams.clear()
        self._expiries.clear()

    async def __aenter__(self) -> MemoryLog:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
