"""Re-runs (``run_retries``): a run whose worker was lost or shut down runs again on a live
process (``Retries``, between ``Liveness`` and ``Runs``).

* **who**: the sweeper of any live process that finds the run's lease lapsed (or its stream failed
  ``WRITER_GONE`` by the log) claims it with a compare-and-set on the record: one process wins,
  the others see the record moved; a process that is shutting down claims nothing;
* **what**: the record's ``attempt`` goes up by one (``retry_reason`` says why), the run's stream
  restarts (``cleanup_to_step(0)``: its attached readers get a ``rewound`` marker; then
  ``reset_stream``: the earlier attempt's chunks are dropped, the sequence goes on) and the agent
  is called again with ``run.attempt``; the run still ends with one terminal;
* **shut down**: a worker whose drain ran out lets a run with a retry left go (no owner, lease
  lapsed, no terminal) instead of failing it ``WORKER_SHUTDOWN``;
* **not**: a stopped run, a resumed run (its stream holds the reply from before its pause), or
  one past its retries: those end ``WORKER_LOST`` / ``WORKER_SHUTDOWN`` as without retries.

Side effects are at-least-once: an attempt that was cut off may have done part of its work; an
agent keys its effects on ``run.run_id`` (the same for every attempt) to make them idempotent.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import anyio.abc

from ..errors import StreamwireError
from ._context import Agent, RunContext, agent_contract
from ._liveness import Liveness
from ._options import effective_retries
from ._record import RunRecord, released, retried

__all__ = ["Retries"]

logger = logging.getLogger("streamwire.runs")


class Retries(Liveness):
    """Claims, releases and re-runs (see the module)."""

    agents: dict[str, Agent]
    run_retries: int
    draining: bool
    _released: set[str]
    _tg: anyio.abc.TaskGroup | None

    async def _spawn(self, fn: Agent, record: RunRecord, ctx: RunContext[Any]) -> None:
        raise NotImplementedError  # Runs'

    def _retries(self, agent: str) -> int:
        fn = self.agents.get(agent)
        return effective_retries(fn, self.run_retries) if fn is not None else 0

    def _may_retry(self, record: RunRecord) -> bool:
        """Whether ``record``'s current attempt may be followed by another (a resumed run is
        not: its stream holds the reply from before its pause)."""
        return (not record.stop_requested and not record.resumes
                and record.attempt <= self._retries(record.agent))

    async def _release(self, run_id: str) -> bool:
        """Let a run this process shuts down go for another process to run again, when it has
        a retry left: the stream stays open (no terminal) and the sweeper of a live process
        takes it up (``_retry``). Returns whether it was let go."""
        while True:
            record = await self.store.get(run_id)
            if (record is None or record.status != "running" or record.owner != self.worker_id
                    or not self._may_retry(record)):
                return False
            if await self.store.swap(released(record, now=time.time(),
                                              reason="WORKER_SHUTDOWN")):
                self._released.add(run_id)
                logger.warning("run %s: shut down at attempt %d; let go for another process to "
                               "run again", run_id, record.attempt)
                return True

    async def _retry(self, record: RunRecord) -> bool:
        """Run again a running run whose worker was lost (its lease expired) or let it go
        (shut down), when it has a retry left: claim it (compare-and-set: one process wins),
        restart its stream (``reset_stream``: a new run of chunks, the counter goes on) and
        call the agent with the next ``attempt``. Returns whether the run was taken care of
        (by this process or, having lost the claim, another)."""
        fn = self.agents.get(record.agent)
        if fn is None or not self._may_retry(record):
            return False
        if self.draining or self._tg is None:
            return True  # leave it to a live process (this one is shutting down)
        new = retried(record, owner=self.worker_id, now=time.time(), lease=self.lease_time)
        if not await self.store.swap(new):
            return True  # another process claimed it (or it moved): the next sweep looks again
        logger.warning("run %s: attempt %d (%s under worker %s)", new.run_id, new.attempt,
                       new.retry_reason, record.owner or "none")
        try:
            # attached readers are told through the protocol (a ``rewound`` marker at step 0),
            # then the stream restarts: attempt 1's chunks go, the sequence goes on
            await self.log.cleanup_to_step(new.stream_id, 0)
            await self.log.reset_stream(new.stream_id)
        except StreamwireError as exc:
            logger.warning("run %s: its stream could not be restarted (%s)", new.run_id, exc)
            await self._settle(new.run_id, "failed", write_terminal=False,
                               error="the run's stream could not be restarted",
                               error_detail={"code": "STREAM_ERROR"}, recoverable=False)
            return True
        await self._spawn(fn, new, RunContext(
            self.log, run_id=new.run_id, agent=new.agent, stream_id=new.stream_id,
            input=new.input, contract=agent_contract(fn), attempt=new.attempt,
            user=new.user))
        return True

