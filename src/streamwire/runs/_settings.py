"""``RunsSettings``: the runs service's options that a deployment sets (``streamwire serve``'s run
flags), each once, with the default ``Runs`` has, its check and its help; the flags are derived
from it (``streamwire._settings``). ``Runs(log, agents, **vars(settings))`` applies them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .._settings import check, option
from ._service import DEFAULT_DRAIN_TIMEOUT, DEFAULT_RECORD_TTL, DEFAULT_STOP_GRACE

__all__ = ["RunsSettings"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunsSettings:
    """What ``Runs`` takes besides its log and agents (the keywords of the same names), checked
    when built: ``ValueError`` names the option and what it must be."""

    lease_time: float | None = option(
        None, "seconds", "--run-lease",
        "seconds before the runs of a dead worker end WORKER_LOST (or are re-run)",
        none_ok=True, shown="half the log's writer timeout, at most 30")
    stop_grace: float = option(
        DEFAULT_STOP_GRACE, "seconds0", "--stop-grace",
        "seconds a stopped run's agent has to end before its run ends interrupted anyway and "
        "the agent is abandoned")
    run_timeout: float | None = option(
        None, "seconds", "--run-timeout",
        "seconds one agent call may run before its run fails TIMEOUT (an agent's own "
        "@agent_options(run_timeout=) wins)", none_ok=True, shown="no limit")
    record_ttl: float = option(
        DEFAULT_RECORD_TTL, "seconds0", "--run-retention",
        "seconds a run's record (/runs/{id}/status, and /sse once its stream expired) is kept "
        "after the run ends; 0: forever", shown="604,800, a week")
    drain_timeout: float = option(
        DEFAULT_DRAIN_TIMEOUT, "seconds0", "--drain-timeout",
        "on SIGTERM, seconds the running runs get to finish (starts answer 503 meanwhile) before "
        "the rest fail WORKER_SHUTDOWN; 0: no drain")
    run_retries: int = option(
        0, "code", "--run-retries",
        "times a run whose worker was lost or shut down is re-run on a live process (an agent's "
        "own @agent_options(run_retries=) wins)", "N")

    def __post_init__(self) -> None:
        check(self)

    def options(self) -> dict[str, Any]:
        """The keywords to give ``Runs``."""
        return {spec.name: getattr(self, spec.name) for spec in dataclasses.fields(self)}
