"""The wire v2 frame values (the "Frames" table of ``seeds/000_e7e163321047a0a9.txt``) and their
unserialised SSE fields."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias, final

import msgspec

__all__ = [
    "CaughtUpFrame",
    "ChunkFrame",
    "EndFrame",
    "EndStatus",
    "FailFrame",
    "RewoundFrame",
    "SSEFields",
    "StreamFrame",
    "TerminalFrame",
    "TruncatedFrame",
    "UnknownFrame",
]

#: The statuses an ``end`` frame carries: completed, paused (suspended) or interrupted (stopped).
EndStatus: TypeAlias = Literal["completed", "paused", "interrupted"]

# Envelope constraints, checked in C while decoding (never on construction): sequences start at 1,
# floors, heads and steps are never negative.
_Sequence: TypeAlias = Annotated[int, msgspec.Meta(ge=1)]
_Count: TypeAlias = Annotated[int, msgspec.Meta(ge=0)]


def _truncated_detail() -> dict[str, Any]:
    return {"code": "TRUNCATED"}


@final
class ChunkFrame(msgspec.Struct, frozen=True, gc=False, rename="camel"):
    """One stream chunk. ``chunk`` is its JSON text, passed through opaquely (``msgspec.Raw``)."""

    sequence: _Sequence
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
    """Terminal: the cursor is below the retention floor; refetch a snapshot, resume from it.

    ``error_detail["code"]`` is always ``"TRUNCATED"`` (the decoder refuses anything else).
    """

    floor: _Count
    error_detail: dict[str, Any] = msgspec.field(default_factory=_truncated_detail)


@final
class RewoundFrame(msgspec.Struct, frozen=True, gc=False, rename="camel", omit_defaults=True):
    """Marker: a cleanup removed the chunks of steps after ``at_step`` while the reader was attached.

    ``at_sequence`` is the head when the cleanup ran; chunks with a sequence above
    ``min_sequence`` (when given) may have been removed.
    """

    at_step: _Count
    at_sequence: _Count | None = None
    min_sequence: _Count | None = None


@final
class CaughtUpFrame(msgspec.Struct, frozen=True, gc=False, rename="camel"):
    """Marker: the replay reached ``head``; live frames follow."""

    head: _Count


@final
class UnknownFrame(msgspec.Struct, frozen=True, gc=False):
    """An event this version does not know: readers ignore it, whatever its data.

    ``id`` is None unless the decoder was asked to keep it (``FrameDecoder(unknown_ids=True)``,
    for a tool that shows plain SSE events): then it is the SSE last event ID in force.
    """

    event: str
    data: str
    id: str | None = None


TerminalFrame: TypeAlias = EndFrame | FailFrame | TruncatedFrame
StreamFrame: TypeAlias = (
    ChunkFrame | EndFrame | FailFrame | TruncatedFrame | RewoundFrame | CaughtUpFrame
)


@final
class SSEFields(msgspec.Struct, frozen=True, gc=False):
    """A frame's unserialised SSE fields (``streamFrameToSSE`` of the wire v2 seed).

    ``id`` is set for chunks only (the sequence); pass the three to ``streamwire.sse.encode_frame``
    or to any SSE response class.
    """

    event: str
    data: str
    id: str | None = None
