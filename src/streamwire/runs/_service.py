"""``Runs``: starts, resumes, stops and sweeps runs over one stream log and its run store.

The rules, written once above the storage:

* **exactly once**: a start inserts the record if its id is new (atomically, in the store); a
  repeat with the same body gets the stored run, another body ``RunConflictError``; each resume id
  is applied once (``_record.check_resume``);
* **one terminal per run**: whoever moves the record out of ``running`` (compare-and-set) writes
  the stream's terminal, and only they: the worker when its agent returns, raises, is stopped or
  shut down, or the sweeper of any process when the worker's lease expired (``WORKER_LOST``);
* **one liveness fact**: the worker renews its runs' leases, keeps their streams' writers alive
  and reads their stop flags every ``poll_interval``; a stop that reaches another process sets the
  flag through the store; a lost worker's runs end ``WORKER_LOST`` on stream and record alike
  (``_liveness``);
* **containment**: nothing an agent raises, returns or emits reaches beyond its run
  (``_execute``; the outcome is checked before any state moves, ``_exit.settlement``);
* **bounds**: an agent runs in a task the service can abandon (``_tasks``): ``stop_grace``
  seconds after a stop (or a shutdown, or its ``run_timeout``) its run settles whether or not the
  agent ended; ``run_timeout`` fails a run whose agent runs longer ``TIMEOUT``;
* **drain**: ``drain()`` (a server's SIGTERM) refuses new starts and resumes, gives the running
  runs ``drain_timeout`` seconds to end on their own, then shuts the rest down (recoverable
  ``WORKER_SHUTDOWN``).
"""

from __future__ import annotations

import logging
import math
import os
import socket
import time
import uuid
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, Final, cast

import anyio
import anyio.abc

from ..errors import (
    RunConflictError,
    RunNotFoundError,
    StreamNotFoundError,
    StreamwireError,
    UnknownAgentError,
    UsageError,
)
from ..log import StreamLog
from ._approvals import read_answers
from ._context import Agent, RunContext, agent_contract, end_context
from ._events import RunEvents
from ._exit import settlement
from ._liveness import default_lease_time, keepalive_interval, writer_timeout_of
from ._options import check_retries, check_timeout, effective_timeout
from ._record import (
    FINISHED_RUN,
    PauseExpiredError,
    RunRecord,
    check_resume,
    check_same_start,
    flag_stop,
    new_record,
    pause_expired,
    resumed,
    settled,
    status_body,
)
from ._retries import Retries
from ._store import RunStore, store_for
from ._tasks import LocalRun, Reason, start_agent

__all__ = ["DEFAULT_DRAIN_TIMEOUT", "DEFAULT_LEASE_TIME", "DEFAULT_POLL_INTERVAL",
           "DEFAULT_RECORD_TTL", "DEFAULT_STOP_GRACE", "DEFAULT_STOP_WAIT", "TIMEOUT", "Runs"]

logger = logging.getLogger("streamwire.runs")

#: The longest a worker's lease on a run lasts without renewal: when a worker dies, its runs end
#: ``WORKER_LOST`` within the lease plus one sweep (a quarter of it, at most 5 s). Renewals come
#: every third of it. Unless ``lease_time`` is given, the lease is half the log's
#: ``writer_timeout`` (15 s by default) capped at this, so that it lapses before the stream's.
DEFAULT_LEASE_TIME: Final = 30.0
#: Seconds between a worker's looks at its own runs' records (stop flags from other processes,
#: lease renewals); none while it runs nothing.
DEFAULT_POLL_INTERVAL: Final = 0.25
#: Seconds a run's record is kept after its last change once it is not running (a week: its
#: status outlives its stream, which the log keeps ``finished_ttl``, an hour by default).
DEFAULT_RECORD_TTL: Final = 7 * 24 * 3600.0
#: Seconds ``stop`` waits for the run's terminal before answering with the status it has.
DEFAULT_STOP_WAIT: Final = 10.0
#: Seconds an agent gets to end once its run is stopped, shut down or timed out, before the run
#: settles without it (its task is abandoned).
DEFAULT_STOP_GRACE: Final = 5.0
#: Seconds a draining worker (SIGTERM) lets its running runs go on before it shuts them down.
DEFAULT_DRAIN_TIMEOUT: Final = 30.0
#: Seconds a shutting-down worker gives its runs to settle once their grace is over.
_SETTLE_WAIT: Final = 5.0
#: ``errorDetail.code`` of a run that ran longer than its ``run_timeout``.
TIMEOUT: Final = "TIMEOUT"


def agent_table(agents: Mapping[str, Agent] | Iterable[Agent]) -> dict[str, Agent]:
    """Agents by name: a mapping as given, else each callable under its ``__name__``."""
    table: dict[str, Agent] = {}
    if isinstance(agents, Mapping):
        table.update(cast("Mapping[str, Agent]", agents))
    else:
        for fn in agents:
            name = getattr(fn, "__name__", "")
            if not name or name in table:
                raise UsageError(f"agent {fn!r} has no name or the name {name!r} is taken; "
                                 "pass a mapping {name: agent}")
            table[name] = fn
    for name, fn in table.items():
        if not callable(fn):
            raise UsageError(f"agent {name!r} is not callable: {fn!r}")
    return table


class Runs(Retries):
    """The runs of one server process: ``async with Runs(log, [agent, ...]) as runs:``.

    Args:
        log: the stream log the runs write to (their records go to the same backend).
        agents: agents by name, or a list of agents served under their ``__name__``.
        store: where records live (default: beside ``log``, ``store_for(log)``).
        lease_time: seconds before a silent worker's runs end ``WORKER_LOST`` (default: half the
            log's ``writer_timeout``, at most ``DEFAULT_LEASE_TIME``).
        poll_interval: seconds between looks at this worker's runs (stop flags, lease renewals,
            stream keepalives).
        stop_wait: seconds ``stop`` waits for the run to settle before answering.
        stop_grace: seconds an agent gets to end after a stop, a shutdown or its timeout; then
            its run settles anyway and its task is abandoned (``abandoned`` counts them).
        run_timeout: seconds one call of an agent (a start or a resume) may run before its run
            fails ``TIMEOUT`` (None: no limit); an agent's own ``@agent_options(run_timeout=)``
            overrides it.
        record_ttl: seconds a record is kept once it is not running (0: forever).
        drain_timeout: seconds ``drain()`` (a server's SIGTERM) lets running runs go on before
            it shuts them down ``WORKER_SHUTDOWN``.
        run_retries: times a run whose worker was lost or shut down is run again, by the sweeper
            of a live process, on a new epoch of its stream (an agent's own
            ``@agent_options(run_retries=)`` overrides it).
        expose_errors: put an agent exception's type and text on the wire (development only).
    """

    def __init__(self, log: StreamLog, agents: Mapping[str, Agent] | Iterable[Agent], *,
                 store: RunStore | None = None, lease_time: float | None = None,
                 poll_interval: float = DEFAULT_POLL_INTERVAL, stop_wait: float = DEFAULT_STOP_WAIT,
                 stop_grace: float = DEFAULT_STOP_GRACE, run_timeout: float | None = None,
                 record_ttl: float = DEFAULT_RECORD_TTL, expose_errors: bool = False,
                 drain_timeout: float = DEFAULT_DRAIN_TIMEOUT, run_retries: int = 0) -> None:
        if not record_ttl >= 0:
            raise UsageError(f"record_ttl must be seconds >= 0 (0: keep records), not {record_ttl!r}")
        if not stop_grace >= 0 or not math.isfinite(stop_grace):
            raise UsageError(f"stop_grace must be seconds >= 0, not {stop_grace!r}")
        if not drain_timeout >= 0 or not math.isfinite(drain_timeout):
            raise UsageError(f"drain_timeout must be seconds >= 0, not {drain_timeout!r}")
        writer_timeout = writer_timeout_of(log)
        if lease_time is None and poll_interval > 0:
            lease_time = default_lease_time(writer_timeout, poll_interval, DEFAULT_LEASE_TIME)
        if lease_time is None or not poll_interval > 0 or not lease_time >= 3 * poll_interval:
            raise UsageError(f"lease_time={lease_time} must be at least 3 x poll_interval="
                             f"{poll_interval} (> 0) so that a lease is renewed in time")
        self.log = log
        self.agents = agent_table(agents)
        self.store = store if store is not None else store_for(log)
        self.lease_time = float(lease_time)
        self.poll_interval = float(poll_interval)
        self.stop_wait = float(stop_wait)
        self.stop_grace = float(stop_grace)
        self.run_timeout = check_timeout("run_timeout", run_timeout)
        self.keepalive_interval = keepalive_interval(self.lease_time, writer_timeout)
        self.record_ttl = float(record_ttl)
        self.expose_errors = expose_errors
        self.drain_timeout = float(drain_timeout)
        self.run_retries = check_retries("run_retries", run_retries) or 0
        #: True once ``drain()`` began: starts and resumes are refused.
        self.draining = False
        #: This process's name in the leases it holds.
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        #: Agent calls made by this process (starts and resumes).
        self.invocations = 0
        #: Agent calls this process gave up on: they ignored their cancellation for
        #: ``stop_grace`` seconds, and their runs settled without them.
        self.abandoned = 0
        self._local: dict[str, LocalRun] = {}
        #: Runs this process let go while shutting down, for another to run again.
        self._released: set[str] = set()
        #: Counters by agent and the settlement log (``GET /metrics``, ``_events``).
        self.events = RunEvents(self.agents, self._local)
        self._tg: anyio.abc.TaskGroup | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> Runs:
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        tg.start_soon(self._keeper)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        tg, self._tg = self._tg, None
        if tg is None:
            return
        await self._shut_down_local()
        tg.cancel_scope.cancel()
        await tg.__aexit__(None, None, None)
        with anyio.CancelScope(shield=True):
            await self.store.aclose()

    async def drain(self) -> list[str]:
        """Refuse new starts and resumes, let this process's running runs go on for up to
        ``drain_timeout`` seconds, then shut down the rest: each fails ``WORKER_SHUTDOWN``
        (recoverable), or, with a retry left (``run_retries``), is let go for another process
        to run again. Returns the ids of the runs let go. Idempotent."""
        self.draining = True
        with anyio.move_on_after(self.drain_timeout):
            while self._local:
                await next(iter(self._local.values())).done.wait()
        left = list(self._local)
        if left:
            logger.warning("drain: %d run(s) still running after %s s; shutting them down",
                           len(left), self.drain_timeout)
        await self._shut_down_local()
        return [run_id for run_id in left if run_id in self._released]

    @property
    def running_here(self) -> list[str]:
        """The ids of the runs whose agents run in this process (their streams' ids too)."""
        return list(self._local)

    async def _shut_down_local(self) -> None:
        for local in list(self._local.values()):
            local.cancel("shutdown")
        with anyio.move_on_after(self.stop_grace + _SETTLE_WAIT, shield=True):
            for local in list(self._local.values()):
                await local.done.wait()

    # -- the API -----------------------------------------------------------------------------

    async def start(self, agent: str, input: Any, run_id: str | None = None, *,
                    user: str | None = None) -> tuple[RunRecord, bool]:
        """Start ``agent`` with ``input`` as run ``run_id`` (minted when None) for ``user`` (its
        ``run.user``), exactly once: returns the run and whether this call created it."""
        fn = self.agents.get(agent)
        if fn is None:
            raise UnknownAgentError(agent, sorted(self.agents))
        if self.draining and run_id:  # a repeat of a start gets its run, a new one is refused
            known = await self.store.get(run_id)
            if known is not None:
                check_same_start(known, agent, input)
                return known, False
        self._check_serving()
        record = new_record(run_id or uuid.uuid4().hex, agent, input, owner=self.worker_id,
                                now=time.time(), lease=self.lease_time, user=user)
        stored = await self.store.insert(record)
        if stored is not None:
            check_same_start(stored, agent, input)
            return stored, False
        try:
            info = await self.log.create_stream(record.stream_id)
        except BaseException:
            await self._settle(record.run_id, "failed", error="the run's stream could not be "
                               "created", error_detail={"code": "STREAM_ERROR"}, recoverable=True)
            raise
        if info.head or info.status != "active":
            # a plain stream already has this id: never write a run into it
            await self._settle(record.run_id, "failed", write_terminal=False,
                               error="the run id names an existing stream",
                               error_detail={"code": "STREAM_EXISTS"}, recoverable=False)
            raise RunConflictError(f"a stream with id {record.stream_id!r} exists; pick another "
                                   "runId")
        await self._spawn(fn, record, RunContext(
            self.log, run_id=record.run_id, agent=agent, stream_id=record.stream_id, input=input,
            contract=agent_contract(fn), user=user))
        return record, True

    async def resume(self, run_id: str, input: Any, resume_id: str) -> tuple[RunRecord, bool]:
        """Resume paused run ``run_id`` with ``input``, once per ``resume_id``: returns the run
        and whether this call resumed it (False: a repeat of an applied resume)."""
        self._check_serving()
        while True:
            record = await self.get(run_id)
            if not check_resume(record, resume_id, input):
                return record, False
            fn = self.agents.get(record.agent)
            if fn is None:
                raise UnknownAgentError(record.agent, sorted(self.agents))
            read_answers(input, record.pending_tools)  # UsageError: an answer to no pending call
            new = resumed(record, resume_id, input, owner=self.worker_id, now=time.time(),
                              lease=self.lease_time)
            if await self.store.swap(new):
                break
        try:
            await self.log.reactivate_stream(new.stream_id)
        except StreamNotFoundError as exc:  # the pause outlived the log's paused_ttl
            await self.store.swap(pause_expired(new, now=time.time()))
            raise PauseExpiredError(run_id, getattr(self.log, "paused_ttl", None)) from exc
        except BaseException:
            # the log failed: the run cannot go on
            await self._settle(run_id, "failed", write_terminal=False,
                               error="the run's stream could not be reactivated",
                               error_detail={"code": "STREAM_ERROR"}, recoverable=False)
            raise
        await self._spawn(fn, new, RunContext(
            self.log, run_id=run_id, agent=new.agent, stream_id=new.stream_id, input=new.input,
            state=record.state, resume_input=input, resumed=True, contract=agent_contract(fn),
            user=new.user, pending_tools=record.pending_tools))
        return new, True

    async def stop(self, run_id: str) -> RunRecord:
        """Stop the run (its agent is cancelled, the stream ends ``interrupted``); idempotent.
        Returns the run as it stands once settled (or after ``stop_wait`` seconds)."""
        while True:
            record = await self.get(run_id)
            if record.status in FINISHED_RUN:
                return record
            if record.status == "paused":
                new = settled(record, "interrupted", now=time.time(), head=record.head,
                                  state=record.state)
                if await self.store.swap(new):
                    self.events.settled(new)
                    try:  # the stream's terminal follows the record (it may have expired)
                        await self.log.reactivate_stream(new.stream_id)
                        await self.log.end_stream(new.stream_id, "interrupted", state=new.state)
                    except StreamwireError as exc:
                        logger.info("run %s: no stream to end interrupted (%s)", run_id, exc)
                    return new
                continue
            if record.stop_requested or await self.store.swap(
                    flag_stop(record, now=time.time())):
                break
        local = self._local.get(run_id)
        if local is not None:
            local.cancel("stop")
        with anyio.move_on_after(self.stop_wait):
            while record.status == "running":
                await anyio.sleep(self.poll_interval / 4)
                record = await self.get(run_id)
        return record

    async def get(self, run_id: str) -> RunRecord:
        """The run's record; ``RunNotFoundError`` when there is none."""
        record = await self.store.get(run_id)
        if record is None:
            raise RunNotFoundError(run_id)
        return record

    async def status(self, run_id: str) -> dict[str, Any]:
        """``GET /runs/{id}/status``'s body (with ``attempt`` when the agent has retries)."""
        record = await self.get(run_id)
        try:
            head = (await self.log.info(record.stream_id)).head
        except StreamwireError:
            head = record.head  # the stream expired (or the log failed): the last known head
        return status_body(record, head, attempts=self._retries(record.agent) > 0)

    # -- running agents ------------------------------------------------------------------------

    def _check_serving(self) -> None:
        if self.draining:
            raise UsageError("the runs service is draining (shutting down): start the run "
                             "elsewhere")
        if self._tg is None:
            raise UsageError("the runs service is not running: use `async with runs:`, or serve "
                             "the app with its lifespan on")

    async def _spawn(self, fn: Agent, record: RunRecord, ctx: RunContext[Any]) -> None:
        self.events.spawned(record)
        if self._tg is None:  # the service began shutting down while this start was under way
            await self._settle(record.run_id, "failed", error="the worker running the agent "
                               "shut down", error_detail={"code": "WORKER_SHUTDOWN"},
                               recoverable=True)
            return
        local = self._local[record.run_id] = LocalRun()
        self._tg.start_soon(self._execute, fn, ctx, local, name=f"run {record.run_id}")

    async def _execute(self, fn: Agent, ctx: RunContext[Any], local: LocalRun) -> None:
        """Call the agent (in a task of its own, ``_tasks``) and settle its run, whatever it
        does: nothing it raises reaches this task (the task group would take every other run
        and the service down with it), and one that ignores its cancellation is abandoned after
        ``stop_grace`` seconds."""
        try:
            self.invocations += 1
            timeout = effective_timeout(fn, self.run_timeout)
            start_agent(fn, ctx, local, name=f"agent {ctx.agent!r} of run {ctx.run_id}")
            try:
                with anyio.move_on_after(timeout):
                    await local.wake.wait()  # the agent's call ended, or the run was cancelled
                local.cancel("timeout")  # a no-op when the agent's call ended
                with anyio.move_on_after(self.stop_grace):
                    while not local.finished:
                        await local.wake.wait()
                        local.wake = anyio.Event()
            finally:
                if not local.finished:  # it ignores its cancellation (or this task was cancelled)
                    self._abandon(ctx, local)
            with anyio.CancelScope(shield=True), anyio.move_on_after(self.lease_time):
                await self._finish(ctx.run_id, local.reason, local.result, local.error,
                                   limit=timeout)
        except Exception:  # the store or log failed: the lease runs out, the sweeper settles it
            logger.exception("run %s: could not settle it", ctx.run_id)
        finally:
            self._local.pop(ctx.run_id, None)
            local.done.set()

    def _abandon(self, ctx: RunContext[Any], local: LocalRun) -> None:
        local.cancel("shutdown")  # when this task was cancelled before the agent ever was
        local.abandon()
        end_context(ctx)  # it may go on, but it emits no more
        self.abandoned += 1
        logger.error("run %s: agent %r ignored its cancellation (%s) for stop_grace=%s s; its "
                     "task is abandoned and the run settles without it", ctx.run_id, ctx.agent,
                     local.reason, self.stop_grace)

    async def _finish(self, run_id: str, reason: Reason | None, result: Any,
                      error: BaseException | None, *, limit: float) -> None:
        if reason == "lost":
            return  # another process settled the run (its lease had expired)
        if reason == "stop":
            await self._settle(run_id, "interrupted")
            return
        if reason == "shutdown":
            if await self._release(run_id):
                return
            await self._settle(run_id, "failed", error="the worker running the agent shut down",
                               error_detail={"code": "WORKER_SHUTDOWN"}, recoverable=True)
            return
        if reason == "timeout":
            logger.warning("run %s: it ran longer than its run_timeout (%s s)", run_id, limit)
            await self._settle(run_id, "failed", error=f"the run took longer than its "
                               f"run_timeout ({limit:g} s)", error_detail={"code": TIMEOUT},
                               recoverable=False)
            return
        if reason == "gone":  # the log ended the stream: the record takes its terminal
            await self._settle(run_id, "failed", error="the run's stream ended",
                               error_detail={"code": "STREAM_ERROR"}, recoverable=True)
            return
        status, fields, problem = settlement(result, error, expose_errors=self.expose_errors)
        if error is not None:
            logger.warning("run %s: the agent failed", run_id, exc_info=error,
                           extra={"run_id": run_id, "stream_id": run_id})
        elif problem is not None:
            logger.warning("run %s: %s", run_id, problem)
        await self._settle(run_id, status, **fields)
