"""Wire v2: the six stream frames, their codec and the terminal state machine (sans-I/O).

The frames are the seed's table (``../shared/seeds/000_*``, "Frames"); field names are snake_case in
Python and camelCase on the wire (``error_detail`` <-> ``errorDetail``).

=========  ==========================================  ========
event      data                                        kind
=========  ==========================================  ========
chunk      {sequence, chunk}, SSE ``id:`` = sequence   content
end        {status, output?, state?, usage?}           terminal
fail       {error, errorDetail?, recoverable}          terminal
truncated  {floor, errorDetail} (code TRUNCATED)       terminal
rewound    {atStep, atSequence?, minSequence?}         marker
caught-up  {head}                                      marker
=========  ==========================================  ========
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias, final

import msgspec

__all__ = [
    "CaughtUpFrame",
    "ChunkFrame",
    "EndFrame",
    "EndStatus",
    "FailFrame",
    "RewoundFrame",
    "StreamFrame",
    "TerminalFrame",
    "TruncatedFrame",
    "UnknownFrame",
]

#: The statuses an ``end`` frame carries: completed, paused (suspended) or interrupted (stopped).
EndStatus: TypeAlias = Literal["completed", "paused", "interrupted"]


def _truncated_detail() -> dict[str, Any]:
    return {"code": "TRUNCATED"}


@final
class ChunkFrame(msgspec.Struct, frozen=True, gc=False, rename="camel"):
    """One stream chunk. ``chunk`` is its JSON text, passed through opaquely (``msgspec.Raw``)."""

    sequence: int
    chunk: msgspec.Raw


@final
class EndFrame(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    """Terminal: the stream ended with ``status``. None means the field is absent on the wire."""

    status: EndStatus
    output: Any = None
    state: Any = None
    usage: dict[str, Any] | None = None


@final
class FailFrame(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    """Terminal: the stream failed. ``recoverable`` means: re-attach from the cursor."""

    error: str
    recoverable: bool
    error_detail: dict[str, Any] | None = None


@final
class TruncatedFrame(msgspec.Struct, frozen=True, rename="camel"):
    """Terminal: the cursor is below the retention floor; refetch a snapshot, resume from it."""

    floor: int
    error_detail: dict[str, Any] = msgspec.field(default_factory=_truncated_detail)


@final
class RewoundFrame(msgspec.Struct, frozen=True, gc=False, rename="camel", omit_defaults=True):
    """Marker: a cleanup removed the chunks of steps after ``at_step`` while the reader was attached.

    ``at_sequence`` is the head when the cleanup ran; chunks with a sequence above
    ``min_sequence`` (when given) may have been removed.
    """

    at_step: int
    at_sequence: int | None = None
    min_sequence: int | None = None


@final
class CaughtUpFrame(msgspec.Struct, frozen=True, gc=False, rename="camel"):
    """Marker: the replay reached ``head``; live frames follow."""

    head: int


@final
class UnknownFrame(msgspec.Struct, frozen=True, gc=False):
    """An event this version does not know: readers ignore it, whatever its data."""

    event: str
    data: str


TerminalFrame: TypeAlias = EndFrame | FailFrame | TruncatedFrame
StreamFrame: TypeAlias = (
    ChunkFrame | EndFrame | FailFrame | TruncatedFrame | RewoundFrame | CaughtUpFrame
)
