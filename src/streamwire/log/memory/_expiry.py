"""When ``MemoryLog``'s finished streams expire: one queue per time to live (``finished_ttl`` for
completed, interrupted and failed streams, ``paused_ttl`` for paused ones), each in finish order,
so each queue is also in expiry order and a sweep looks only at the heads."""

from __future__ import annotations

import time
from typing import final

from .. import StreamStatus
from .._common import ttl_for

__all__ = ["Expiries"]


@final
class Expiries:
    """The finished streams that expire, by id (``time.monotonic`` deadlines)."""

    __slots__ = ("_queues", "finished_ttl", "paused_ttl")

    def __init__(self, finished_ttl: float, paused_ttl: float) -> None:
        self.finished_ttl = finished_ttl
        self.paused_ttl = paused_ttl
        # one per TTL: a stream's deadline is its finish time plus its queue's TTL
        self._queues: tuple[dict[str, float], dict[str, float]] = ({}, {})

    def add(self, stream_id: str, status: StreamStatus) -> float | None:
        """The stream just ended with ``status``: its deadline (None: it is kept)."""
        self.discard(stream_id)
        ttl = ttl_for(status, self.finished_ttl, self.paused_ttl)
        if not ttl:  # 0 keeps it until it is reactivated, reset or deleted
            return None
        at = time.monotonic() + ttl
        self._queues[status == "paused"][stream_id] = at
        return at

    def discard(self, stream_id: str) -> None:
        """The stream is active again, or gone."""
        for queue in self._queues:
            queue.pop(stream_id, None)

    def due(self) -> list[str]:
        """The ids whose deadline passed (still queued: ``discard`` each as it is forgotten)."""
        now = time.monotonic()
        due: list[str] = []
        for queue in self._queues:
            for stream_id, at in queue.items():
                if at > now:
                    break
                due.append(stream_id)
        return due

    def clear(self) -> None:
        for queue in self._queues:
            queue.clear()
