"""The remote protocol's frame part: a ``/sse`` body -> transport events, and the outcome of a
terminal (``decodeTransportEvents`` and ``remoteTerminalOutcome`` of the wire v2 seed,
``seeds/000_e7e163321047a0a9.txt``, "The remote protocol").

The sync and async readers are twins around one sans-I/O ``TransportDecoder``; neither imports an
event loop (an ``AsyncIterable[bytes]`` is all the async one needs).
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from typing import Any, TypeAlias, assert_never, final

import msgspec

from ..errors import StreamDropError
from ..sse import DEFAULT_MAX_EVENT_SIZE, DEFAULT_MAX_LINE_SIZE
from ._codec import FrameDecoder
from ._types import (
    ChunkFrame,
    EndFrame,
    EndStatus,
    FailFrame,
    StreamFrame,
    TerminalFrame,
    TruncatedFrame,
    UnknownFrame,
)

__all__ = [
    "RemoteOutcome",
    "RemoteOutcomeKind",
    "TransportDecoder",
    "TransportEvent",
    "decode_transport_events",
    "iter_transport_events",
    "remote_terminal_outcome",
]

#: The wire v2 seed's TransportEvents (chunk, end, fail, truncated) are exactly these frames:
#: the markers (``rewound``, ``caught-up``) and unknown events are not transport events.
TransportEvent: TypeAlias = ChunkFrame | EndFrame | FailFrame | TruncatedFrame


class TransportDecoder:
    """Sans-I/O: body bytes -> transport events; stops at the first terminal frame.

    ``feed`` returns the events the bytes complete (the terminal last); ``close`` at the end of
    the body delivers an unterminated last frame and raises ``StreamDropError`` if no terminal
    came (a body without one is a drop, never a clean end). Bytes after the terminal are ignored:
    the body is over.
    """

    __slots__ = ("_decoder", "cursor", "terminal")

    def __init__(self, *, max_line_size: int = DEFAULT_MAX_LINE_SIZE,
                 max_event_size: int = DEFAULT_MAX_EVENT_SIZE) -> None:
        self._decoder = FrameDecoder(max_line_size=max_line_size, max_event_size=max_event_size)
        #: The highest chunk sequence seen (what a drop reports as its cursor).
        self.cursor = 0
        #: The terminal frame, once seen.
        self.terminal: TerminalFrame | None = None

    def feed(self, data: bytes | bytearray) -> list[TransportEvent]:
        """Decode more bytes. Raises ``MalformedFrameError`` / ``SSEDecodeError`` as the decoder does."""
        if self.terminal is not None:
            return []
        return self._events(self._decoder.feed(data))

    def close(self) -> list[TransportEvent]:
        """End of body: the last events; raises ``StreamDropError`` if no terminal frame came."""
        if self.terminal is not None:
            return []
        events = self._events(self._decoder.flush())
        if self.terminal is None:
            raise StreamDropError(
                f"the body ended without a terminal frame at cursor {self.cursor}",
                cursor=self.cursor)
        return events

    def _events(self, frames: list[StreamFrame | UnknownFrame]) -> list[TransportEvent]:
        out: list[TransportEvent] = []
        for frame in frames:
            if type(frame) is ChunkFrame:
                if frame.sequence > self.cursor:
                    self.cursor = frame.sequence
                out.append(frame)
            elif isinstance(frame, EndFrame | FailFrame | TruncatedFrame):
                self.terminal = frame
                out.append(frame)
                break
        return out


async def decode_transport_events(
    body: AsyncIterable[bytes], *, max_line_size: int = DEFAULT_MAX_LINE_SIZE,
    max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
) -> AsyncIterator[TransportEvent]:
    """Yield the transport events of a wire v2 body (e.g. ``response.aiter_bytes()``).

    The last event is the terminal frame; reading stops there.

    Raises:
        StreamDropError: the body ended with no terminal frame (``.cursor``: the last sequence).
        MalformedFrameError: a known frame did not validate (retryable).
    """
    decoder = TransportDecoder(max_line_size=max_line_size, max_event_size=max_event_size)
    async for data in body:
        for event in decoder.feed(data):
            yield event
        if decoder.terminal is not None:
            return
    for event in decoder.close():
        yield event


def iter_transport_events(
    body: Iterable[bytes], *, max_line_size: int = DEFAULT_MAX_LINE_SIZE,
    max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
) -> Iterator[TransportEvent]:
    """The sync twin of ``decode_transport_events`` (e.g. over ``response.iter_bytes()``)."""
    decoder = TransportDecoder(max_line_size=max_line_size, max_event_size=max_event_size)
    for data in body:
        yield from decoder.feed(data)
        if decoder.terminal is not None:
            return
    yield from decoder.close()


class RemoteOutcomeKind(enum.Enum):
    """How a remote dispatch settles after the stream's terminal (``remoteTerminalOutcome``)."""

    #: ``end`` completed: the run succeeded.
    COMPLETED = "completed"
    #: ``end`` paused or interrupted: the run stopped without finishing (not a success).
    STOPPED = "stopped"
    #: a recoverable ``fail``, or ``truncated``: re-attach (from a snapshot after truncated).
    RETRY = "retry"
    #: a ``fail`` that is not recoverable: the run failed.
    FAILED = "failed"


@final
class RemoteOutcome(msgspec.Struct, frozen=True):
    """A remote run's outcome with what the terminal carried (``error_detail`` kept as sent)."""

    kind: RemoteOutcomeKind
    terminal: TerminalFrame
    status: EndStatus | None = None
    error: str | None = None
    error_detail: dict[str, Any] | None = None


def remote_terminal_outcome(terminal: TerminalFrame) -> RemoteOutcome:
    """Map a terminal frame to the remote dispatch's outcome.

    ``truncated`` maps to RETRY: the run itself neither failed nor ended, only this reader fell
    below the retention floor; the dispatch recovers the way it does after a drop (``/status``,
    or a snapshot and ``resume_from``), and ``error_detail`` (code TRUNCATED) says why.
    """
    match terminal:
        case EndFrame(status=status):
            kind = RemoteOutcomeKind.COMPLETED if status == "completed" else RemoteOutcomeKind.STOPPED
            return RemoteOutcome(kind, terminal, status=status)
        case FailFrame(error=error, recoverable=recoverable, error_detail=detail):
            kind = RemoteOutcomeKind.RETRY if recoverable else RemoteOutcomeKind.FAILED
            return RemoteOutcome(kind, terminal, error=error, error_detail=detail)
        case TruncatedFrame(error_detail=detail):
            return RemoteOutcome(RemoteOutcomeKind.RETRY, terminal, error_detail=detail)
        case _:
            assert_never(terminal)


