"""How a run settles for its dispatcher (sans-I/O): the stream's terminal, or the run's
``/status`` after a drop, mapped through the one rule ``remote_terminal_outcome``."""

from __future__ import annotations

from typing import Any, final

import msgspec

from ..frames import (
    EndFrame,
    FailFrame,
    RemoteOutcomeKind,
    TerminalFrame,
    TruncatedFrame,
    remote_terminal_outcome,
)
from ._record import RunStatus

__all__ = ["RunOutcome", "outcome_from_status", "outcome_from_terminal"]


@final
class RunOutcome(msgspec.Struct, frozen=True):
    """A run's outcome: ``kind`` is completed, stopped (paused or interrupted), retry (a
    recoverable failure: start it again, or re-attach) or failed. ``status`` is the run's status
    when known; the other fields are what its terminal carried (``error_detail`` kept as sent)."""

    kind: RemoteOutcomeKind
    terminal: TerminalFrame
    status: RunStatus | None = None
    output: Any = None
    state: Any = None
    usage: dict[str, Any] | None = None
    error: str | None = None
    error_detail: dict[str, Any] | None = None
    recoverable: bool | None = None
    #: Where it came from: the stream's terminal frame, or ``/status`` after a drop.
    source: str = "stream"

    def describe(self) -> str:
        """One line for people: ``completed``, ``failed (AGENT_ERROR): ...``."""
        text = self.kind.value
        if self.status is not None and self.status != text:
            text += f" ({self.status})"
        code = (self.error_detail or {}).get("code")
        if code:
            text += f" [{code}]"
        if self.error:
            text += f": {self.error}"
        return text


def outcome_from_terminal(terminal: TerminalFrame, *, source: str = "stream") -> RunOutcome:
    """The outcome a terminal frame means (``remote_terminal_outcome``)."""
    remote = remote_terminal_outcome(terminal)
    match terminal:
        case EndFrame(status=status, output=output, state=state, usage=usage):
            return RunOutcome(remote.kind, terminal, status, output, state, usage, source=source)
        case FailFrame(error=error, recoverable=recoverable):
            return RunOutcome(remote.kind, terminal, "failed", error=error,
                              error_detail=remote.error_detail, recoverable=recoverable,
                              source=source)
        case TruncatedFrame():
            return RunOutcome(remote.kind, terminal, None, error_detail=remote.error_detail,
                              source=source)


def outcome_from_status(body: dict[str, Any]) -> RunOutcome | None:
    """The outcome a ``GET /runs/{id}/status`` body means; None while the run is ``running``."""
    status = body.get("status")
    if status == "failed":
        terminal: TerminalFrame = FailFrame(
            error=str(body.get("error") or "the run failed"),
            recoverable=bool(body.get("recoverable")), error_detail=body.get("errorDetail"))
    elif status in ("completed", "paused", "interrupted"):
        terminal = EndFrame(status=status, output=body.get("output"), state=body.get("state"),
                            usage=body.get("usage"))
    else:
        return None
    return outcome_from_terminal(terminal, source="status")
