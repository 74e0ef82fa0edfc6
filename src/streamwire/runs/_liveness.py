"""One liveness fact per run: the run's lease, its stream's writer lease, and who writes the
terminal when either lapses (``Liveness``, the base of ``Runs``).

* While a worker holds a run's lease it keeps the run's stream's writer alive too: the keeper
  renews the lease every third of ``lease_time`` and calls ``log.keepalive`` on the stream every
  ``keepalive_interval`` (``min(lease_time, writer_timeout) / 3``), however long the agent is silent.
* When the worker is lost, its leases lapse together. The run's lease is the shorter one by default
  (``default_lease_time``), so a sweeper settles the run ``WORKER_LOST`` and writes that fail on
  the stream before the log's own writer timeout would (``WRITER_GONE``).
* With a retry left (``run_retries``), the sweeper that finds the lapsed lease (or a stream the
  log failed ``WRITER_GONE``) runs the agent again instead (``Runs._retry``), and a worker that
  shuts down lets its runs go (no owner, lease expired) rather than failing them.
* Whichever fires first, the other agrees: a run whose stream already has a terminal (the log's
  writer timeout fired first, or a terminal raced ours) settles with the stream's terminal, and a
  sweeper settles at once a running run whose stream the log failed ``WRITER_GONE``.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from typing import Any, Final, Literal

import anyio

from ..errors import StreamwireError
from ..log import StreamInfo, StreamLog
from ._events import RunEvents
from ._record import RunRecord, RunStatus, agreeing, lease_expired, renewed, settled
from ._store import RunStore
from ._tasks import LocalRun

__all__ = ["WRITER_GONE", "Liveness", "default_lease_time", "keepalive_interval",
           "writer_timeout_of"]

logger = logging.getLogger("streamwire.runs")

#: ``errorDetail.code`` of the fail the log writes on a stream whose writer stopped renewing.
WRITER_GONE: Final = "WRITER_GONE"

#: Which running runs ``_settle`` may settle: this worker's, one whose lease expired, or one
#: whose stream the log already failed (any owner).
_Only = Literal["mine", "lost", "gone"]


def writer_timeout_of(log: StreamLog) -> float | None:
    """The log's ``writer_timeout`` (every backend takes one), or None when it has none."""
    value: object = getattr(log, "writer_timeout", None)
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


def default_lease_time(writer_timeout: float | None, poll_interval: float, cap: float) -> float:
    """A run lease that lapses well before its stream's writer lease would (half of
    ``writer_timeout``, at most ``cap``, at least 3 x ``poll_interval``)."""
    if writer_timeout is None:
        return cap
    return max(min(cap, writer_timeout / 2), 3 * poll_interval)


def _stream_terminal(info: StreamInfo) -> tuple[RunStatus, dict[str, Any]]:
    """The status and fields of the terminal ``info``'s (finished) stream has."""
    if info.status == "failed":
        return "failed", {"error": info.error or "the run failed", "recoverable":
                          bool(info.recoverable), "error_detail": info.error_detail,
                          "output": None, "usage": None}
    status: RunStatus = "interrupted" if info.status == "active" else info.status
    return status, {"output": info.output, "state": info.state, "usage": info.usage,
                    "error": None, "error_detail": None, "recoverable": None}


class Liveness:
    """Leases, stream keepalives, the sweeper and settling (see the module)."""

    log: StreamLog
    store: RunStore
    worker_id: str
    lease_time: float
    poll_interval: float
    record_ttl: float
    #: Seconds between keepalives of a local run's stream.
    keepalive_interval: float
    events: RunEvents
    _local: dict[str, LocalRun]

    async def _settle(self, run_id: str, status: RunStatus, *, only: _Only = "mine",
                      write_terminal: bool = True, **fields: Any) -> RunRecord | None:
        """Move the run out of ``running`` (compare-and-set) and, having won, write the stream's
        terminal; when the stream already has one, the record takes it instead. Returns None
        when the run had already left ``running`` (someone else won)."""
        try:
            info: StreamInfo | None = await self.log.info(run_id)
        except StreamwireError:
            info = None
        head = info.head if info is not None else 0
        if write_terminal and info is not None and info.status != "active":
            status, fields = _stream_terminal(info)
            write_terminal = False
        while True:
            record = await self.store.get(run_id)
            if record is None or record.status != "running":
                return None
            if only == "mine" and record.owner != self.worker_id:
                return None
            if only == "lost" and not lease_expired(record, time.time()):
                return None
            if only == "gone" and write_terminal:
                return None  # the stream is active after all
            if status == "failed":
                fields.setdefault("recoverable", False)
            new = settled(record, status, now=time.time(), head=head, **fields)
            if await self.store.swap(new):
                break
        self.events.settled(new)
        if write_terminal:
            return await self._write_terminal(new)
        return new

    async def _write_terminal(self, record: RunRecord) -> RunRecord:
        try:
            if record.status == "failed":
                await self.log.fail_stream(record.stream_id, record.error or "the run failed",
                                           error_detail=record.error_detail,
                                           recoverable=bool(record.recoverable))
            elif record.status != "running":
                await self.log.end_stream(record.stream_id, record.status, output=record.output,
                                          state=record.state, usage=record.usage)
        except StreamwireError as exc:
            # the log ended it in between (its writer timeout): the record takes its terminal
            logger.info("run %s: the stream already had its terminal (%s)", record.run_id, exc)
            return await self._agree(record)
        return record

    async def _agree(self, record: RunRecord) -> RunRecord:
        """Make the settled ``record`` carry its stream's terminal."""
        while True:
            try:
                info = await self.log.info(record.stream_id)
            except StreamwireError:
                return record  # no stream left to agree with
            if info.status == "active":
                return record
            status, fields = _stream_terminal(info)
            new = agreeing(record, status, now=time.time(), head=info.head, **fields)
            if new == record or await self.store.swap(new):
                return new
            current = await self.store.get(record.run_id)
            if current is None or current.status == "running":
                return record
            record = current

    # -- the keeper: leases, keepalives, stop flags, the sweeper -----------------------------------

    async def _keeper(self) -> None:
        # Sweeps for lost runs come every quarter lease (at most every 5 s): a dead worker's runs
        # end within lease_time plus that, and an idle process reads the store only that often.
        sweep_every = max(1, round(min(self.lease_time / 4, 5.0) / self.poll_interval))
        for tick in itertools.count(1):
            await anyio.sleep(self.poll_interval)
            try:
                if self._local:
                    await self._tend()
                if tick % sweep_every == 0:
                    await self._sweep()
            except StreamwireError as exc:
                logger.warning("runs keeper: %s", exc)
            except Exception:  # a bug must not stop the leases of every run with it
                logger.exception("runs keeper failed; it goes on")

    async def _tend(self) -> None:
        now = time.time()
        for run_id, local in list(self._local.items()):
            if local.finished or local.abandoned:
                continue  # being settled: nothing to keep alive
            record = await self.store.get(run_id)
            if record is None or record.status != "running" or record.owner != self.worker_id:
                local.cancel("lost")
                continue
            if record.stop_requested:
                local.cancel("stop")
            if record.lease_expires_at - now < self.lease_time * 2 / 3:
                await self.store.swap(renewed(record, now=now, lease=self.lease_time))
            if time.monotonic() - local.last_keepalive >= self.keepalive_interval:
                await self._keepalive(run_id, record.stream_id, local)

    async def _keepalive(self, run_id: str, stream_id: str, local: LocalRun) -> None:
        try:
            await self.log.keepalive(stream_id)
        except StreamwireError as exc:
            try:
                active = (await self.log.info(stream_id)).status == "active"
            except StreamwireError:
                active = False
            if active:  # the log failed, not the stream: try again next tick
                logger.warning("run %s: its stream's keepalive failed (%s)", run_id, exc)
                return
            logger.warning("run %s: its stream ended without its worker (%s)", run_id, exc)
            local.cancel("gone")
            return
        local.last_keepalive = time.monotonic()

    async def _sweep(self) -> None:
        now = time.time()
        if self.record_ttl:
            await self.store.expire(now - self.record_ttl)
        for run_id in await self.store.running():
            if run_id in self._local:
                continue
            record = await self.store.get(run_id)
            if record is None or record.status != "running":
                continue
            if lease_expired(record, now) and await self._retry(record):
                continue
            if lease_expired(record, now):
                logger.warning("run %s: its worker %s lost its lease", run_id, record.owner)
                await self._settle(run_id, "failed", only="lost",
                                   error="the worker running the agent was lost",
                                   error_detail={"code": "WORKER_LOST"}, recoverable=True)
            elif await self._writer_gone(record):
                if await self._retry(record):
                    continue
                logger.warning("run %s: the log failed its stream (%s) under worker %s", run_id,
                               WRITER_GONE, record.owner)
                await self._settle(run_id, "failed", only="gone")

    async def _retry(self, record: RunRecord) -> bool:
        """Run a lost run again instead of failing it (``Runs``: ``run_retries``); True when
        the run was taken care of."""
        return False

    async def _writer_gone(self, record: RunRecord) -> bool:
        """Whether the log failed the running run's stream for its writer's silence (its worker
        is gone, and the log noticed before the run's lease expired)."""
        try:
            info = await self.log.info(record.stream_id)
        except StreamwireError:
            return False
        return info.status == "failed" and (info.error_detail or {}).get("code") == WRITER_GONE


def keepalive_interval(lease_time: float, writer_timeout: float | None) -> float:
    """Seconds between keepalives of a run's stream: a third of the lease or of the writer
    timeout, whichever is shorter."""
    return min(lease_time, writer_timeout if writer_timeout is not None else math.inf) / 3
