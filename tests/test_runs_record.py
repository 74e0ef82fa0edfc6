"""The run record's rules without I/O: the transitions table, exactly-once checks, leases, the
``/status`` body and the outcome a status or a terminal means."""

from __future__ import annotations

import itertools

import pytest

from streamwire.errors import RunConflictError, RunStateError
from streamwire.frames import EndFrame, FailFrame, RemoteOutcomeKind, TruncatedFrame
from streamwire.runs import TRANSITIONS, outcome_from_status, outcome_from_terminal
from streamwire.runs._record import (
    check_resume,
    check_same_start,
    decode_record,
    encode_record,
    fingerprint,
    lease_expired,
    new_record,
    renewed,
    resumed,
    settled,
    status_body,
)

STATUSES = ("running", "completed", "paused", "interrupted", "failed")


def _record(status: str = "running"):  # type: ignore[no-untyped-def]
    record = new_record("r1", "echo", {"b": 1, "a": [1, 2]}, owner="w1", now=100.0, lease=30.0)
    if status == "running":
        return record
    if status == "paused":
        return settled(record, "paused", now=101.0, head=3, state={"k": 1})
    return settled(record, status, now=101.0, head=3)  # type: ignore[arg-type]


def test_the_table_is_the_only_way_to_change_status() -> None:
    assert set(TRANSITIONS) == set(STATUSES)
    for source, target in itertools.product(STATUSES, STATUSES):
        if source == "paused" and target == "running":
            continue  # only through resumed(), tested below
        record = _record(source)
        if target in TRANSITIONS[source]:  # type: ignore[index]
            assert settled(record, target, now=200.0, head=3).status == target  # type: ignore[arg-type]
        else:
            with pytest.raises(RunStateError):
                settled(record, target, now=200.0, head=3)  # type: ignore[arg-type]


def test_each_change_bumps_the_version_and_round_trips() -> None:
    record = _record()
    assert record.version == 1
    assert record.lease_expires_at == 130.0
    later = renewed(record, now=120.0, lease=30.0)
    assert (later.version, later.lease_expires_at, later.status) == (2, 150.0, "running")
    assert decode_record(encode_record(later)) == later


def test_a_start_repeats_only_with_the_same_body() -> None:
    record = _record()
    check_same_start(record, "echo", {"a": [1, 2], "b": 1})  # key order does not matter
    with pytest.raises(RunConflictError):
        check_same_start(record, "echo", {"a": [2, 1], "b": 1})
    with pytest.raises(RunConflictError):
        check_same_start(record, "other", {"a": [1, 2], "b": 1})
    assert fingerprint("x", {"a": 1}) != fingerprint("x", {"a": "1"})


def test_a_resume_applies_once_per_id_and_only_to_a_paused_run() -> None:
    paused = _record("paused")
    assert check_resume(paused, "k1", {"w": 1}) is True
    again = resumed(paused, "k1", {"w": 1}, owner="w2", now=300.0, lease=30.0)
    assert (again.status, again.owner, again.state) == ("running", "w2", {"k": 1})
    assert check_resume(again, "k1", {"w": 1}) is False  # a repeat: the same run, nothing new
    with pytest.raises(RunConflictError):
        check_resume(again, "k1", {"w": 2})
    with pytest.raises(RunStateError):
        check_resume(again, "k2", {"w": 1})
    done = settled(again, "completed", now=301.0, head=5)
    assert done.state is None  # only a pause keeps a state


def test_a_lease_expires_only_for_a_running_run() -> None:
    record = _record()
    assert not lease_expired(record, 129.9)
    assert lease_expired(record, 130.1)
    assert not lease_expired(_record("failed"), 1e9)


def test_status_body_and_outcome_agree_with_the_terminal() -> None:
    failed = settled(_record(), "failed", now=1.0, head=7, error="lost",
                     error_detail={"code": "WORKER_LOST"}, recoverable=True)
    body = status_body(failed, 7)
    assert body == {"runId": "r1", "streamId": "r1", "agent": "echo", "status": "failed",
                    "head": 7, "error": "lost", "errorDetail": {"code": "WORKER_LOST"},
                    "recoverable": True}
    from_status = outcome_from_status(body)
    from_frame = outcome_from_terminal(FailFrame("lost", True, {"code": "WORKER_LOST"}))
    assert from_status is not None
    assert from_status.kind is from_frame.kind is RemoteOutcomeKind.RETRY
    assert from_status.error_detail == from_frame.error_detail
    assert outcome_from_status({**body, "status": "running"}) is None
    paused = outcome_from_status(status_body(_record("paused"), 3))
    assert paused is not None
    assert (paused.kind, paused.state) == (RemoteOutcomeKind.STOPPED, {"k": 1})
    assert outcome_from_terminal(EndFrame("completed")).kind is RemoteOutcomeKind.COMPLETED
    assert outcome_from_terminal(TruncatedFrame(3)).kind is RemoteOutcomeKind.RETRY
