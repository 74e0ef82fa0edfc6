"""Helpers the contract suite's tests share (and a backend's own tests may use)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Sequence
from typing import Any, Final, Protocol

import anyio

from ..frames import ChunkFrame, EndFrame, FailFrame, StreamFrame, TruncatedFrame
from ..log import StreamLog

__all__ = [
    "GUARD",
    "LogFactory",
    "aclose_reader",
    "assert_one_terminal_last",
    "chunk_of",
    "chunk_seqs",
    "fill",
    "read_all",
    "read_n",
    "terminals",
]


#: Seconds any one step of a contract test may take before it fails as a hang.
GUARD: Final = 10.0


class LogFactory(Protocol):
    """Makes a fresh, empty log with the given limits (only the keywords a test sets)."""

    def __call__(self, **limits: Any) -> Awaitable[StreamLog]: ...


def chunk_of(n: int) -> bytes:
    """The JSON text of test chunk ``n``."""
    return b'{"n":%d}' % n


async def aclose_reader(frames: AsyncIterator[StreamFrame]) -> None:
    """Close a reader (an async generator) early, releasing what it holds."""
    close = getattr(frames, "aclose", None)
    if close is not None:
        await close()


async def read_all(log: StreamLog, stream_id: str, cursor: int = 0) -> list[StreamFrame]:
    """Every frame one reader gets from ``cursor`` until the iterator stops."""
    frames = log.read(stream_id, cursor)
    out: list[StreamFrame] = []
    try:
        with anyio.fail_after(GUARD):
            out.extend([frame async for frame in frames])
    finally:
        await aclose_reader(frames)
    return out


async def read_n(frames: AsyncIterator[StreamFrame], n: int) -> list[StreamFrame]:
    """The next ``n`` frames of an open reader."""
    with anyio.fail_after(GUARD):
        return [await anext(frames) for _ in range(n)]


def chunk_seqs(frames: Sequence[StreamFrame]) -> list[int]:
    """The sequences of the chunk frames."""
    return [f.sequence for f in frames if isinstance(f, ChunkFrame)]


def terminals(frames: Sequence[StreamFrame]) -> list[StreamFrame]:
    """The terminal frames."""
    return [f for f in frames if isinstance(f, EndFrame | FailFrame | TruncatedFrame)]


def assert_one_terminal_last(frames: Sequence[StreamFrame]) -> None:
    """Exactly one terminal frame, and it is the last."""
    found = terminals(frames)
    assert len(found) == 1, frames
    assert frames[-1] is found[0], frames


async def fill(log: StreamLog, stream_id: str, steps: Sequence[int]) -> list[int]:
    """Append ``chunk_of(1..)`` at ``steps``; return the sequences."""
    return [await log.append(stream_id, step, chunk_of(i)) for i, step in enumerate(steps, 1)]
