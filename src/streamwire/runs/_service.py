"""``Runs``: starts, resumes, stops and sweeps runs over one stream log and its run store.

The rules, written once above the storage:

* **exactly once**: a start inserts the record if its id is new (atomically, in the store); a
  repeat with the same body gets the stored run, another body ``RunConflictError``; each resume id
  is applied once (``_record.check_resume``);
* **one terminal per run**: whoever moves the record out of ``running`` (compare-and-set) writes
  the stream's terminal, and only they: the worker when its agent returns, raises, is stopped or
  shut down, or the sweeper of any process when the worker's lease expired (``WORKER_LOST``);
* **leases**: the worker renews its runs' leases and reads their stop flags every
  ``poll_interval``; a stop that reaches another process sets the flag through the store;
* **containment**: nothing an agent raises, returns or emits reaches beyond its run
  (``_execute``; the outcome is checked before any state moves, ``_exit.settlement``).
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import socket
import time
import uuid
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, Final, Literal, TypeAlias, cast

import anyio
import anyio.abc

from ..errors import (
    RunConflictError,
    RunNotFoundError,
    StreamwireError,
    UnknownAgentError,
    UsageError,
)
from ..log import StreamLog
from ._context import Agent, RunContext, agent_contract, end_context
from ._exit import settlement
from ._record import (
    FINISHED_RUN,
    RunRecord,
    RunStatus,
    check_resume,
    check_same_start,
    flag_stop,
    lease_expired,
    new_record,
    renewed,
    resumed,
    settled,
    status_body,
)
from ._store import RunStore, store_for

__all__ = ["DEFAULT_LEASE_TIME", "DEFAULT_POLL_INTERVAL", "DEFAULT_RECORD_TTL",
           "DEFAULT_STOP_WAIT", "Runs"]

logger = logging.getLogger("streamwire.runs")

#: Seconds a worker's lease on a run lasts without renewal: when a worker dies, its runs end
#: ``WORKER_LOST`` within this time plus one sweep (a quarter of it, at most 5 s). Renewals come
#: every third of it.
DEFAULT_LEASE_TIME: Final = 30.0
#: Seconds between a worker's looks at its own runs' records (stop flags from other processes,
#: lease renewals); none while it runs nothing.
DEFAULT_POLL_INTERVAL: Final = 0.25
#: Seconds a run's record is kept after its last change once it is not running (a week: its
#: status outlives its stream, which the log keeps ``finished_ttl``, an hour by default).
DEFAULT_RECORD_TTL: Final = 7 * 24 * 3600.0
#: Seconds ``stop`` waits for the run's terminal before answering with the status it has.
DEFAULT_STOP_WAIT: Final = 10.0
#: Seconds a shutting-down worker gives its agents to end (each gets a terminal either way).
_SHUTDOWN_WAIT: Final = 5.0

_Reason: TypeAlias = Literal["stop", "lost", "shutdown"]


class _Local:
    """A run whose agent runs in this process."""

    __slots__ = ("done", "reason", "scope")

    def __init__(self) -> None:
        self.scope = anyio.CancelScope()
        self.reason: _Reason | None = None
        self.done = anyio.Event()

    def cancel(self, reason: _Reason) -> None:
        if self.reason is None:
            self.reason = reason
        self.scope.cancel()


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


class Runs:
    """The runs of one server process: ``async with Runs(log, [agent, ...]) as runs:``.

    Args:
        log: the stream log the runs write to (their records go to the same backend).
        agents: agents by name, or a list of agents served under their ``__name__``.
        store: where records live (default: beside ``log``, ``store_for(log)``).
        lease_time: seconds before a silent worker's runs end ``WORKER_LOST``.
        poll_interval: seconds between looks at this worker's runs (stop flags, lease renewals).
        stop_wait: seconds ``stop`` waits for the run to settle before answering.
        record_ttl: seconds a record is kept once it is not running (0: forever).
        expose_errors: put an agent exception's type and text on the wire (development only).
    """

    def __init__(self, log: StreamLog, agents: Mapping[str, Agent] | Iterable[Agent], *,
                 store: RunStore | None = None, lease_time: float = DEFAULT_LEASE_TIME,
                 poll_interval: float = DEFAULT_POLL_INTERVAL, stop_wait: float = DEFAULT_STOP_WAIT,
                 record_ttl: float = DEFAULT_RECORD_TTL, expose_errors: bool = False) -> None:
        if not record_ttl >= 0:
            raise UsageError(f"record_ttl must be seconds >= 0 (0: keep records), not {record_ttl!r}")
        if not poll_interval > 0 or not lease_time >= 3 * poll_interval:
            raise UsageError(f"lease_time={lease_time} must be at least 3 x poll_interval="
                             f"{poll_interval} (> 0) so that a lease is renewed in time")
        self.log = log
        self.agents = agent_table(agents)
        self.store = store if store is not None else store_for(log)
        self.lease_time = float(lease_time)
        self.poll_interval = float(poll_interval)
        self.stop_wait = float(stop_wait)
        self.record_ttl = float(record_ttl)
        self.expose_errors = expose_errors
        #: This process's name in the leases it holds.
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        #: Agent calls made by this process (starts and resumes).
        self.invocations = 0
        self._local: dict[str, _Local] = {}
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
        for local in list(self._local.values()):
            local.cancel("shutdown")
        with anyio.move_on_after(_SHUTDOWN_WAIT, shield=True):
            for local in list(self._local.values()):
                await local.done.wait()
        tg.cancel_scope.cancel()
        await tg.__aexit__(None, None, None)
        with anyio.CancelScope(shield=True):
            await self.store.aclose()

    # -- the API -----------------------------------------------------------------------------

    async def start(self, agent: str, input: Any, run_id: str | None = None
                    ) -> tuple[RunRecord, bool]:
        """Start ``agent`` with ``input`` as run ``run_id`` (minted when None), exactly once:
        returns the run and whether this call created it."""
        fn = self.agents.get(agent)
        if fn is None:
            raise UnknownAgentError(agent, sorted(self.agents))
        self._check_serving()
        record = new_record(run_id or uuid.uuid4().hex, agent, input, owner=self.worker_id,
                                now=time.time(), lease=self.lease_time)
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
            contract=agent_contract(fn)))
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
            new = resumed(record, resume_id, input, owner=self.worker_id, now=time.time(),
                              lease=self.lease_time)
            if await self.store.swap(new):
                break
        try:
            await self.log.reactivate_stream(new.stream_id)
        except BaseException:
            # the stream is gone (expired) or the log failed: the run cannot go on
            await self._settle(run_id, "failed", write_terminal=False,
                               error="the run's stream could not be reactivated",
                               error_detail={"code": "STREAM_ERROR"}, recoverable=False)
            raise
        await self._spawn(fn, new, RunContext(
            self.log, run_id=run_id, agent=new.agent, stream_id=new.stream_id, input=new.input,
            state=record.state, resume_input=input, resumed=True, contract=agent_contract(fn)))
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
        """``GET /runs/{id}/status``'s body."""
        record = await self.get(run_id)
        try:
            head = (await self.log.info(record.stream_id)).head
        except StreamwireError:
            head = record.head  # the stream expired (or the log failed): the last known head
        return status_body(record, head)

    # -- running agents ------------------------------------------------------------------------

    def _check_serving(self) -> None:
        if self._tg is None:
            raise UsageError("the runs service is not running: use `async with runs:`, or serve "
                             "the app with its lifespan on")

    async def _spawn(self, fn: Agent, record: RunRecord, ctx: RunContext[Any]) -> None:
        if self._tg is None:  # the service began shutting down while this start was under way
            await self._settle(record.run_id, "failed", error="the worker running the agent "
                               "shut down", error_detail={"code": "WORKER_SHUTDOWN"},
                               recoverable=True)
            return
        local = self._local[record.run_id] = _Local()
        self._tg.start_soon(self._execute, fn, ctx, local, name=f"run {record.run_id}")

    async def _execute(self, fn: Agent, ctx: RunContext[Any], local: _Local) -> None:
        """Call the agent and settle its run, whatever it does: nothing it raises leaves this
        task (the task group would take every other run and the service down with it)."""
        result: Any = None
        error: BaseException | None = None
        try:
            with local.scope:
                self.invocations += 1
                try:
                    result = await fn(ctx)
                except BaseException as exc:
                    # Every class is the agent's: SystemExit (sys.exit()), GeneratorExit, a custom
                    # BaseException, a CancelledError nobody asked for, and KeyboardInterrupt
                    # too: under uvicorn (and asyncio.run) a real Ctrl-C goes to their signal
                    # handlers, which drain the server, never out of an agent's task; one raised
                    # there is the agent's doing. (Under Python's default handler, a Ctrl-C
                    # landing while agent code runs would fail that run instead: containment's
                    # price.) Only a real cancellation goes on: of this run (a stop, a lost lease,
                    # a shutdown: the scope ends it, local.reason says which), or of the task
                    # group around it.
                    if not _cancelled_for_real(exc, local.scope):
                        error = exc
                    elif not local.scope.cancel_called:
                        raise
                finally:
                    end_context(ctx)  # a task the agent left behind emits no more
            with anyio.CancelScope(shield=True), anyio.move_on_after(self.lease_time):
                await self._finish(ctx.run_id, local.reason, result, error)
        except Exception:  # the store or log failed: the lease runs out, the sweeper settles it
            logger.exception("run %s: could not settle it", ctx.run_id)
        finally:
            self._local.pop(ctx.run_id, None)
            local.done.set()

    async def _finish(self, run_id: str, reason: _Reason | None, result: Any,
                      error: BaseException | None) -> None:
        if reason == "lost":
            return  # another process settled the run (its lease had expired)
        if reason == "stop":
            await self._settle(run_id, "interrupted")
            return
        if reason == "shutdown":
            await self._settle(run_id, "failed", error="the worker running the agent shut down",
                               error_detail={"code": "WORKER_SHUTDOWN"}, recoverable=True)
            return
        status, fields, problem = settlement(result, error, expose_errors=self.expose_errors)
        if error is not None:
            logger.warning("run %s: the agent failed", run_id, exc_info=error)
        elif problem is not None:
            logger.warning("run %s: %s", run_id, problem)
        await self._settle(run_id, status, **fields)

    async def _settle(self, run_id: str, status: RunStatus, *, lost_only: bool = False,
                      write_terminal: bool = True, **fields: Any) -> RunRecord | None:
        """Move the run out of ``running`` (compare-and-set) and, having won, write the stream's
        terminal. Only this worker's runs, or (``lost_only``) a run whose lease expired. Returns
        None when the run had already left ``running`` (someone else won)."""
        try:
            head = (await self.log.info(run_id)).head
        except StreamwireError:
            head = 0
        while True:
            record = await self.store.get(run_id)
            if record is None or record.status != "running":
                return None
            if not (lease_expired(record, time.time()) if lost_only
                    else record.owner == self.worker_id):
                return None
            if status == "failed":
                fields.setdefault("recoverable", False)
            new = settled(record, status, now=time.time(), head=head, **fields)
            if await self.store.swap(new):
                break
        if write_terminal:
            await self._write_terminal(new)
        return new

    async def _write_terminal(self, record: RunRecord) -> None:
        try:
            if record.status == "failed":
                await self.log.fail_stream(record.stream_id, record.error or "the run failed",
                                           error_detail=record.error_detail,
                                           recoverable=bool(record.recoverable))
            elif record.status != "running":
                await self.log.end_stream(record.stream_id, record.status, output=record.output,
                                          state=record.state, usage=record.usage)
        except StreamwireError as exc:  # the log already ended it (e.g. its writer was declared gone)
            logger.info("run %s: the stream already had its terminal (%s)", record.run_id, exc)

    # -- the keeper: leases, stop flags, the sweeper ----------------------------------------------

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
            record = await self.store.get(run_id)
            if record is None or record.status != "running" or record.owner != self.worker_id:
                local.cancel("lost")
            elif record.stop_requested:
                local.cancel("stop")
            elif record.lease_expires_at - now < self.lease_time * 2 / 3:
                await self.store.swap(renewed(record, now=now, lease=self.lease_time))

    async def _sweep(self) -> None:
        now = time.time()
        if self.record_ttl:
            await self.store.expire(now - self.record_ttl)
        for run_id in await self.store.running():
            if run_id in self._local:
                continue
            record = await self.store.get(run_id)
            if record is not None and lease_expired(record, now):
                logger.warning("run %s: its worker %s lost its lease", run_id, record.owner)
                await self._settle(run_id, "failed", lost_only=True,
                                   error="the worker running the agent was lost",
                                   error_detail={"code": "WORKER_LOST"}, recoverable=True)


def _cancelled_for_real(exc: BaseException, scope: anyio.CancelScope) -> bool:
    """Whether ``exc`` ends the agent because the run (``scope``) or something around it was
    cancelled, not because the agent raised a cancellation of its own accord: a cancelled scope
    makes the effective deadline -inf (asyncio and trio alike)."""
    if scope.cancel_called:
        return True  # whatever it raised on its way out, the run was stopped or shut down
    cancelled = anyio.get_cancelled_exc_class()
    ours = isinstance(exc, cancelled) or (
        isinstance(exc, BaseExceptionGroup)
        and cast("BaseExceptionGroup[BaseException]", exc).split(cancelled)[1] is None)
    return ours and anyio.current_effective_deadline() == -math.inf
