"""What a ``Runs`` service tells its operator about its runs (``Runs.events``): counters for
``GET /metrics`` and one structured log record per settlement.

The service calls two hooks, both synchronous and O(1): ``spawned`` when an agent call begins in
this process (a start, a resume, a re-run) and ``settled`` when this process moves a run out of
``running`` (or a paused run to ``interrupted``), whoever ran it: a sweeper that settles a lost
worker's run counts it here; an ``observer`` (the server's tracing) is told of both. Labels stay
bounded: a run of an agent this process does not serve (another deployment sharing the store) is
counted under ``OTHER_AGENT``, and statuses are the ``RunStatus`` literals.

Each settlement is logged on ``streamwire.runs`` with the run's ids, agent and ``errorDetail``
code as fields (``extra``: ``run_id``, ``stream_id``, ``agent``, ``status``, ``code``), which
``serve --log-format json`` writes as JSON keys: INFO for ``completed``, ``paused`` and
``interrupted``, WARNING for ``failed`` -- unless the failure is the worker's own shutdown
(``WORKER_SHUTDOWN``: recoverable, the expected end of a run a stopping process lets go), which
is INFO too.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable
from typing import Any, Final, Protocol

from ._record import RunRecord

__all__ = ["OTHER_AGENT", "RunEvents", "RunObserver", "run_fields"]

logger = logging.getLogger("streamwire.runs")

#: The agent label of a run whose agent this process does not serve.
OTHER_AGENT: Final = "_other"


def run_fields(record: RunRecord) -> dict[str, Any]:
    """The ``extra`` fields of a log record about ``record``."""
    fields: dict[str, Any] = {"run_id": record.run_id, "stream_id": record.stream_id,
                              "agent": record.agent, "status": record.status}
    code = (record.error_detail or {}).get("code")
    if isinstance(code, str):
        fields["code"] = code
    return fields


class RunObserver(Protocol):
    """Told of ``RunEvents``' two hooks as they happen (synchronous; must not raise)."""

    def spawned(self, record: RunRecord) -> None: ...

    def settled(self, record: RunRecord) -> None: ...


class RunEvents:
    """Counters of one ``Runs`` service by agent (and status), and its settlement log."""

    __slots__ = ("_agent_of", "_local", "agents", "finished", "observer", "started")

    def __init__(self, agents: Iterable[str], local: Collection[str] = ()) -> None:
        #: the agents this process serves: the label values (besides ``OTHER_AGENT``)
        self.agents = frozenset(agents)
        #: agent calls begun here (starts, resumes, re-runs), by agent
        self.started: dict[str, int] = dict.fromkeys(sorted(self.agents), 0)
        #: settlements made here, by (agent, status)
        self.finished: dict[tuple[str, str], int] = {}
        #: the agent of each run whose call began here and may still run (pruned by ``running``)
        self._agent_of: dict[str, str] = {}
        #: the ids of the runs whose agents run here (the service's own table, read only)
        self._local = local
        #: told of each ``spawned`` and ``settled`` too (the server's tracing installs one)
        self.observer: RunObserver | None = None

    def label(self, agent: str) -> str:
        """``agent`` as a label value: itself when served here, else ``OTHER_AGENT``."""
        return agent if agent in self.agents else OTHER_AGENT

    def spawned(self, record: RunRecord) -> None:
        """An agent call of ``record`` begins in this process."""
        agent = self.label(record.agent)
        self.started[agent] = self.started.get(agent, 0) + 1
        self._agent_of[record.run_id] = agent
        if self.observer is not None:
            self.observer.spawned(record)

    def settled(self, record: RunRecord) -> None:
        """This process moved ``record`` to its (new) status: count it and log it."""
        key = (self.label(record.agent), record.status)
        self._agent_of.pop(record.run_id, None)
        self.finished[key] = self.finished.get(key, 0) + 1
        if self.observer is not None:
            self.observer.settled(record)
        fields = run_fields(record)
        if record.status == "failed" and fields.get("code") != "WORKER_SHUTDOWN":
            logger.warning("run %s: agent %r failed %s", record.run_id, record.agent,
                           fields.get("code", "(no code)"), extra=fields)
        else:
            logger.info("run %s: agent %r %s", record.run_id, record.agent, record.status,
                        extra=fields)

    def running(self) -> dict[str, int]:
        """Runs whose agents run in this process now, by agent (this also forgets the runs
        that left the service's table unsettled: let go, or a settlement that failed)."""
        counts = dict.fromkeys(sorted(self.agents), 0)
        local = self._local
        for run_id in [r for r in self._agent_of if r not in local]:
            del self._agent_of[run_id]
        for agent in self._agent_of.values():
            counts[agent] = counts.get(agent, 0) + 1
        return counts
