"""What a ``RedisLog`` reader looks at: ``ReadView`` s (``streamwire.log._reader``) of one page read
atomically by a script, and of one live message. Both are partial: a view answers None for a range
it does not hold, and the reader then reads a fresh page."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from operator import itemgetter
from typing import Any, Final, cast, final

import msgspec

from ...frames import ChunkFrame, EndFrame, RewoundFrame, TerminalFrame
from .. import StreamStatus
from ._live import Live, end_decoder, fail_decoder, rewound_decoder
from ._scripts import LiveKind

__all__ = ["GONE", "PAGE", "Gone", "LiveView", "Page"]

#: Entries per ``XRANGE`` page when replaying or catching up: bounds one reply's memory.
PAGE: Final = 512
_seq_of = itemgetter(0)
_EMPTY: Final[tuple[ChunkFrame, ...]] = ()


@final
class Page:
    """Meta, one ``XRANGE`` page after ``after`` and the next marker above ``mark``, read
    atomically by the page script."""

    __slots__ = ("_blind", "_mark", "_marker", "_term", "deleted", "entries", "epoch", "head",
                 "lease_left", "lost_above", "low", "marks", "run_start", "status",
                 "truncated_at_step")

    status: StreamStatus

    def __init__(self, reply: list[Any], mark: int) -> None:
        self.deleted = False
        epoch, head, status, run, tfloor, nrew, marker, term, lease = reply[0]
        self.epoch = cast(bytes, epoch).decode()
        self.head = int(head)
        self.status = cast(StreamStatus, cast(bytes, status).decode())
        self.run_start = int(run)
        self.lost_above = int(tfloor)
        self.marks = int(nrew)
        self.truncated_at_step = None if marker is None else int(marker)
        self._term: bytes | None = term
        low = int(reply[1])
        self.low = low or None
        flat: list[bytes] = reply[2]
        self.entries = [(int(flat[i][:-2]), flat[i + 1]) for i in range(0, len(flat), 2)]
        self._mark = mark
        self._marker = None if reply[4] is None else (
            int(reply[3]), rewound_decoder.decode(reply[4]))
        self._blind = False
        #: Seconds until the writer's lease lapses (Redis's clock; <= 0: lapsed), None when the
        #: stream is not active or has no lease.
        self.lease_left = None if lease is None or self.status != "active" else (
            (int(lease) - int(reply[5])) / 1000)

    @property
    def trimmed(self) -> bool:
        return self.lost_above > 0

    def floor(self) -> int:
        return self.low - 1 if self.low else self.head

    def next_marker(self, mark: int) -> tuple[int, RewoundFrame] | None:
        if mark == self._mark:
            return self._marker
        # the reader took this page's marker: the page does not know the one after it
        self._blind = mark < self.marks
        return None

    def chunks(self, after: int, upto: int) -> Sequence[ChunkFrame] | None:
        if self._blind:
            return None
        entries = self.entries
        i = bisect_right(entries, after, key=_seq_of)
        j = bisect_right(entries, upto, i, key=_seq_of)
        if i == j:
            # a full page ends where the script stopped reading, not where the stream does
            full = len(entries) == PAGE and upto > entries[-1][0]
            return None if full else _EMPTY
        raw = msgspec.Raw
        return [ChunkFrame(seq, raw(chunk)) for seq, chunk in entries[i:j]]

    def terminal(self) -> TerminalFrame:
        term = self._term
        assert term is not None  # a finished stream has one
        return fail_decoder.decode(term) if self.status == "failed" else end_decoder.decode(term)


@final
class Gone:
    """The view of a stream that does not exist (any more)."""

    def __init__(self) -> None:
        self.deleted = True
        self.epoch = ""
        self.status: StreamStatus = "failed"
        self.head = self.run_start = self.lost_above = self.marks = 0
        self.truncated_at_step: int | None = None
        self.trimmed = False

    def floor(self) -> int:
        return 0

    def next_marker(self, mark: int) -> tuple[int, RewoundFrame] | None:
        return None

    def chunks(self, after: int, upto: int) -> Sequence[ChunkFrame] | None:
        return None

    def terminal(self) -> TerminalFrame:
        raise AssertionError("a gone stream has no terminal")


GONE: Final = Gone()


@final
class LiveView:
    """One live message of the reader's epoch, seen as the stream's state: chunks it carries, a
    marker, a terminal or the deletion. The reader only looks at one when it is caught up."""

    __slots__ = ("_item", "deleted", "epoch", "head", "lost_above", "marks", "run_start", "status",
                 "trimmed", "truncated_at_step")

    def __init__(self, item: Live) -> None:
        self._item = item
        self.run_start = self.marks = 0
        self.lost_above = 0  # a message carries every chunk after the reader, or it reads a page
        self.truncated_at_step: int | None = None
        self.trimmed = False
        self.epoch = item.epoch
        self.deleted = item.kind is LiveKind.DELETED
        kind = item.kind
        self.status: StreamStatus = "active"
        if kind is LiveKind.CHUNKS:
            self.head = item.number + len(item.frames) - 1
        elif kind is LiveKind.REWOUND:
            self.head = cast(RewoundFrame, item.frames[0]).at_sequence or 0
        else:
            self.head = item.number
            if kind is LiveKind.END:
                self.status = cast(EndFrame, item.frames[0]).status
            elif kind is LiveKind.FAIL:
                self.status = "failed"

    def floor(self) -> int:
        raise AssertionError("a live message of the reader's epoch loses nothing")

    def next_marker(self, mark: int) -> tuple[int, RewoundFrame] | None:
        item = self._item
        if item.kind is LiveKind.REWOUND and item.number > mark:
            return item.number, cast(RewoundFrame, item.frames[0])
        return None

    def chunks(self, after: int, upto: int) -> Sequence[ChunkFrame] | None:
        item = self._item
        if item.kind is not LiveKind.CHUNKS:
            return _EMPTY if after >= upto else None
        first = item.number
        if after + 1 < first:
            return None  # a gap: the chunks between are in storage
        frames = cast(tuple[ChunkFrame, ...], item.frames)
        return frames[after + 1 - first:upto + 1 - first]

    def terminal(self) -> TerminalFrame:
        return cast(TerminalFrame, self._item.frames[0])
