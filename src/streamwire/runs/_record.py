"""The run record and its rules, sans-I/O: statuses, the one transitions table, request
fingerprints (exactly-once checks), leases and the ``/status`` body.

Every store keeps records as the JSON ``encode_record`` makes and changes them only by
compare-and-set on ``version``; these functions compute the next record, the store only swaps it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Final, Literal, TypeAlias, final

import msgspec

from ..errors import PauseExpiredError, RunConflictError, RunStateError
from ..frames import EndFrame, FailFrame, TerminalFrame

__all__ = [
    "FINISHED_RUN",
    "PAUSE_EXPIRED",
    "TRANSITIONS",
    "PauseExpiredError",
    "RunRecord",
    "RunStatus",
    "agreeing",
    "check_resume",
    "check_same_start",
    "decode_record",
    "encode_record",
    "fingerprint",
    "flag_stop",
    "lease_expired",
    "new_record",
    "pause_expired",
    "released",
    "renewed",
    "resumed",
    "retried",
    "settled",
    "status_body",
    "terminal_of",
]

#: A run's status: ``running`` while its agent runs, ``paused`` until a resume, then final.
RunStatus: TypeAlias = Literal["running", "completed", "paused", "interrupted", "failed"]

#: Every status change a run may make, and only these (the run's state machine).
TRANSITIONS: Final[Mapping[RunStatus, frozenset[RunStatus]]] = {
    "running": frozenset({"completed", "paused", "interrupted", "failed"}),
    "paused": frozenset({"running", "interrupted"}),  # a resume, or a stop while paused
    "completed": frozenset(),
    "interrupted": frozenset(),
    "failed": frozenset(),
}

#: The statuses a run never leaves.
FINISHED_RUN: Final[frozenset[RunStatus]] = frozenset(
    s for s, targets in TRANSITIONS.items() if not targets)


@final
class RunRecord(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    """One run as the store keeps it (JSON field names camelCase).

    ``version`` grows by one on every change (the compare-and-set token). ``owner`` is the worker
    running the agent and ``lease_expires_at`` (epoch seconds) when others may declare it lost.
    ``fingerprint`` identifies the start request's body; ``resumes`` maps each resume id to its
    body's fingerprint, so each is applied once. ``attempt`` counts the agent's calls for this
    run's current reply (2 after one re-run: its worker was lost or shut down), and
    ``retry_reason`` says why the last one began (``WORKER_LOST``, ``WORKER_SHUTDOWN``) -- or, on
    a running record with no ``owner``, why its worker let it go for another to re-run. ``user``
    is the user who started the run (the ``authorize`` hook's principal; None: anonymous): the run
    is theirs alone (``server._owners``).
    """

    run_id: str
    agent: str
    stream_id: str
    status: RunStatus
    fingerprint: str
    created_at: float
    updated_at: float
    version: int = 1
    input: Any = None
    output: Any = None
    state: Any = None
    usage: dict[str, Any] | None = None
    error: str | None = None
    error_detail: dict[str, Any] | None = None
    recoverable: bool | None = None
    owner: str = ""
    lease_expires_at: float = 0.0
    stop_requested: bool = False
    resumes: dict[str, str] = msgspec.field(default_factory=dict[str, str])
    resume_input: Any = None
    head: int = 0
    attempt: int = 1
    retry_reason: str | None = None
    user: str | None = None
    #: a paused run's tool calls waiting for a person (``_approvals``): approvals, client tools
    pending_tools: list[dict[str, Any]] | None = None


_encoder: Final = msgspec.json.Encoder(order="sorted")
_decoder: Final = msgspec.json.Decoder(RunRecord)


def encode_record(record: RunRecord) -> bytes:
    """The record's stored JSON."""
    return _encoder.encode(record)


def decode_record(data: bytes | str) -> RunRecord:
    """A stored record back."""
    return _decoder.decode(data)


def fingerprint(*parts: object) -> str:
    """A digest of a request body (canonical JSON: key order does not matter)."""
    return hashlib.sha256(_encoder.encode(parts)).hexdigest()[:32]


def new_record(run_id: str, agent: str, input: Any, *, owner: str, now: float,
               lease: float, user: str | None = None) -> RunRecord:
    """A run that ``user`` starts now, its lease held by worker ``owner``."""
    return RunRecord(run_id=run_id, agent=agent, stream_id=run_id, status="running",
                     fingerprint=fingerprint(agent, input), created_at=now, updated_at=now,
                     input=input, owner=owner, lease_expires_at=now + lease, user=user)


def check_same_start(record: RunRecord, agent: str, input: Any) -> None:
    """A repeated start must carry the first one's body (CP-95), else ``RunConflictError``."""
    if record.fingerprint != fingerprint(agent, input):
        raise RunConflictError(
            f"run {record.run_id!r} was started with another body; a retry sends the same "
            "agent and input, a new run needs a new runId")


def settled(record: RunRecord, status: RunStatus, *, now: float, head: int,
            **fields: Any) -> RunRecord:
    """The record after its agent ended (``status`` final or paused) with the terminal's fields;
    only a pause keeps a state unless one is given."""
    if status != "paused":
        fields.setdefault("state", None)
        fields.setdefault("pending_tools", None)
    return _move(record, status, now, head=head, lease_expires_at=0.0, stop_requested=False,
                 **fields)


def agreeing(record: RunRecord, status: RunStatus, *, now: float, head: int,
             **fields: Any) -> RunRecord:
    """The settled ``record`` corrected to the terminal its stream has (``status`` and fields):
    the log wrote another terminal first (its writer timeout), and the stream's terminal is what
    every reader saw. The same record when it already agrees."""
    if record.status == "running":
        raise RunStateError(f"run {record.run_id!r} is running; only a settled run is corrected")
    fields.setdefault("state", None)
    if status != "paused":
        fields.setdefault("pending_tools", None)
    changes = {"status": status, "head": head, **fields}
    if all(getattr(record, k) == v for k, v in changes.items() if k != "head"):
        return record
    return msgspec.structs.replace(record, version=record.version + 1, updated_at=now, **changes)


def resumed(record: RunRecord, resume_id: str, input: Any, *, owner: str, now: float,
            lease: float) -> RunRecord:
    """The paused record taken up again by ``owner`` with ``input`` for resume ``resume_id``."""
    return _move(record, "running", now, owner=owner, lease_expires_at=now + lease,
                 resumes={**record.resumes, resume_id: fingerprint(input)}, resume_input=input,
                 output=None, usage=None, pending_tools=None)


#: ``errorDetail.code`` of a paused run whose stream expired (the log's ``paused_ttl``) before a
#: resume came: its state is gone, the run ends ``failed`` (not recoverable).
PAUSE_EXPIRED: Final = "PAUSE_EXPIRED"


def pause_expired(record: RunRecord, *, now: float) -> RunRecord:
    """The resumed ``record`` (``running``, its stream found expired) settled ``failed``
    ``PAUSE_EXPIRED``, keeping the head its stream had."""
    return settled(record, "failed", now=now, head=record.head,
                   error="the run was paused longer than its stream is kept (paused_ttl); its "
                         "state is gone", error_detail={"code": PAUSE_EXPIRED}, recoverable=False)


def terminal_of(record: RunRecord) -> TerminalFrame:
    """The terminal frame a settled (or paused) run's stream ended with, rebuilt from its record
    (``/runs/{id}/sse`` once the stream expired)."""
    if record.status == "running":
        raise RunStateError(f"run {record.run_id!r} is running: it has no terminal yet")
    if record.status == "failed":
        return FailFrame(error=record.error or "the run failed",
                         recoverable=bool(record.recoverable), error_detail=record.error_detail)
    return EndFrame(status=record.status, output=record.output, state=record.state,
                    usage=record.usage)


def renewed(record: RunRecord, *, now: float, lease: float) -> RunRecord:
    """The same run with its lease extended (no status change)."""
    return msgspec.structs.replace(record, version=record.version + 1, updated_at=now,
                                   lease_expires_at=now + lease)


def released(record: RunRecord, *, now: float, reason: str) -> RunRecord:
    """The running record let go by its worker (shut down) for another process to re-run: no
    owner, its lease expired, ``reason`` kept for the next attempt."""
    return msgspec.structs.replace(record, version=record.version + 1, updated_at=now, owner="",
                                   lease_expires_at=0.0, retry_reason=reason)


def retried(record: RunRecord, *, owner: str, now: float, lease: float) -> RunRecord:
    """The lost (or released) running record taken by ``owner`` for its next attempt."""
    if record.status != "running":
        raise RunStateError(f"run {record.run_id!r} is {record.status}; only a running run whose "
                            "worker is gone is run again")
    reason = record.retry_reason if not record.owner and record.retry_reason else "WORKER_LOST"
    return msgspec.structs.replace(record, version=record.version + 1, updated_at=now,
                                   owner=owner, lease_expires_at=now + lease, head=0,
                                   attempt=record.attempt + 1, retry_reason=reason)


def flag_stop(record: RunRecord, *, now: float) -> RunRecord:
    """The running record flagged for its worker to cancel (a stop reaching another process)."""
    return msgspec.structs.replace(record, version=record.version + 1, updated_at=now,
                                   stop_requested=True)


def lease_expired(record: RunRecord, now: float) -> bool:
    """A running run whose worker stopped renewing its lease: it counts as lost."""
    return record.status == "running" and record.lease_expires_at < now


def check_resume(record: RunRecord, resume_id: str, input: Any) -> bool:
    """Whether resume ``resume_id`` is new (True) or a repeat of an applied one (False).
    A repeat with another body is ``RunConflictError``; a new one needs a paused run."""
    seen = record.resumes.get(resume_id)
    if seen is not None:
        if seen != fingerprint(input):
            raise RunConflictError(f"resume {resume_id!r} of run {record.run_id!r} was sent with "
                                   "another input; a new resume needs a new resumeId")
        return False
    if record.status != "paused":
        raise RunStateError(f"run {record.run_id!r} is {record.status}; only a paused run "
                            "can be resumed")
    return True


def _move(record: RunRecord, status: RunStatus, now: float, **fields: Any) -> RunRecord:
    if status not in TRANSITIONS[record.status]:
        raise RunStateError(f"run {record.run_id!r} cannot go from {record.status} to {status}")
    return msgspec.structs.replace(record, status=status, version=record.version + 1,
                                   updated_at=now, **fields)


def status_body(record: RunRecord, head: int, *, attempts: bool = False) -> dict[str, Any]:
    """``GET /runs/{id}/status``: the record's public fields, camelCase, absent ones left out;
    ``attempt`` when the run may be re-run (``attempts``) or was."""
    body: dict[str, Any] = {"runId": record.run_id, "streamId": record.stream_id,
                            "agent": record.agent, "status": record.status, "head": head}
    if attempts or record.attempt > 1:
        body["attempt"] = record.attempt
    optional = (("output", record.output), ("state", record.state), ("usage", record.usage),
                ("error", record.error), ("errorDetail", record.error_detail),
                ("recoverable", record.recoverable), ("retryReason", record.retry_reason),
                ("pendingTools", record.pending_tools))
    body.update((k, v) for k, v in optional if v is not None)
    return body
