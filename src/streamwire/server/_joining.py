"""What a stream connection or its hub (``_sse``, ``_fanout``) writes in one message: the catch-up
of a connection joining a hub without a reader of its own (``Joining``), and a batch of frames
(``batch_of``, ``messages``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, final

from ..frames import ChunkFrame, StreamFrame, encode_stream_frame
from ..log._reader import ReaderState, ReadPosition, in_step

if TYPE_CHECKING:
    from ._fanout import Hub

__all__ = ["CATCH_UP_BYTES", "ENCODED_CACHE", "MESSAGE_BYTES", "Joining", "batch_of", "messages"]

#: Encoded chunks a hub keeps for its joiners (then it starts again: a bound, not an LRU).
ENCODED_CACHE: Final = 4096
#: Bytes of the catch-up bodies a hub keeps for the joiners still to come (then it starts again).
CATCH_UP_BYTES: Final = 4 * 1024 * 1024
#: Bytes of one batch's frames a hub writes as one message: a batch goes out at the pace of
#: the followers, and well under ``max_backlog_bytes``.
MESSAGE_BYTES: Final = 64 * 1024


@final
class Joining:
    """A connection ``Fanout.prepare`` d to join ``hub``: the frames it gets first, and the
    position of the reader it would have had after them."""

    __slots__ = ("first", "frames", "head", "hub", "position")

    def __init__(self, hub: Hub, frames: list[StreamFrame], state: ReaderState) -> None:
        self.hub, self.frames, self.head, self.position = hub, frames, state.pos, ReadPosition()
        self.position.state = state
        self.position.last = frames[-1]
        #: the response's first bytes (the ``retry`` preamble), written with the frames
        self.first = b""

    def in_step(self) -> bool:
        hub = self.hub
        return (not hub.closing and hub.fanout.hubs.get(hub.stream_id) is hub
                and in_step(self.position, self.frames[-1], hub.position, hub.current))

    def catch_up(self) -> bytes | None:
        """The one message (its first bytes included) that brings the connection to its hub's
        position, while that is exact (None: the hub moved on, or ended)."""
        if not self.in_step():
            return None
        hub, frames = self.hub, self.frames
        # the joiners at one cursor share their frames (``JoinMemo``): their body is encoded once
        kept = hub.catch_ups.get(id(frames))
        if kept is not None and kept[0] is frames:
            return self.first + kept[1]
        encoded, encode = hub.encoded, encode_stream_frame
        parts: list[bytes] = []
        if len(encoded) > ENCODED_CACHE:
            encoded.clear()
        for frame in frames:
            if type(frame) is ChunkFrame:
                body = encoded.get(frame.sequence)
                if body is None:
                    body = encoded[frame.sequence] = encode(frame)
                parts.append(body)
            else:
                parts.append(encode(frame))
        body = b"".join(parts)
        if len(body) <= CATCH_UP_BYTES:
            if hub.catch_up_bytes + len(body) > CATCH_UP_BYTES:
                hub.catch_ups.clear()
                hub.catch_up_bytes = 0
            hub.catch_ups[id(frames)] = frames, body
            hub.catch_up_bytes += len(body)
        return self.first + body


def messages(bodies: list[bytes]) -> list[bytes]:
    """A batch's frames as messages of up to ``MESSAGE_BYTES`` (a frame larger goes alone)."""
    if len(bodies) <= 1:
        return bodies
    out: list[bytes] = []
    start = size = 0
    for i, body in enumerate(bodies):
        if size and size + len(body) > MESSAGE_BYTES:
            out.append(b"".join(bodies[start:i]))
            start, size = i, 0
        size += len(body)
    out.append(b"".join(bodies[start:]))
    return out


def batch_of(position: ReadPosition | None, last: StreamFrame) -> Sequence[StreamFrame]:
    """The batch a reader read with ``position.paged`` just yielded as ``last`` (a log that
    ignores ``paged`` yields each frame as a batch of its own)."""
    page = position.page if position is not None else ()
    return page if page and page[-1] is last else (last,)
