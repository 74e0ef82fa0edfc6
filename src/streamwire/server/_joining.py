"""A connection about to join its stream's hub without a reader of its own (``_fanout``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, final

from ..frames import StreamFrame
from ..log._reader import ReaderState, ReadPosition, in_step

if TYPE_CHECKING:
    from ._fanout import Hub

__all__ = ["Joining"]


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
