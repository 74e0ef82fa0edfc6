"""``settled``: the cheap look a backend takes before parking a reader must never disagree with
the read rules (``next_frames``). Checked against MemoryLog's own view after random histories."""

from __future__ import annotations

import asyncio
import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from streamwire.log._reader import ReaderState, attach, next_frames, settled
from streamwire.log.memory import MemoryLog

_OPS = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(0, 3)),
    st.tuples(st.just("cleanup"), st.integers(0, 3)),
    st.tuples(st.just("read"), st.integers(1, 3)),
    st.tuples(st.just("end"), st.just(0)),
    st.tuples(st.just("fail"), st.just(0)),
    st.tuples(st.just("reset"), st.just(0)),
    st.tuples(st.just("delete"), st.just(0)),
    st.tuples(st.just("close"), st.just(0)),
), max_size=30)


async def _history(ops: list[tuple[str, int]], trim: int) -> int:
    log = MemoryLog(max_chunks_per_stream=trim)
    await log.create_stream("s")
    stream = log._streams["s"]
    readers: list[ReaderState] = []
    closed = False
    looks = 0
    for op, arg in ops:
        try:
            if op == "append":
                await log.append("s", arg, b"1")
            elif op == "cleanup":
                await log.cleanup_to_step("s", arg)
            elif op == "end":
                await log.end_stream("s")
            elif op == "fail":
                await log.fail_stream("s", "boom")
            elif op == "reset":
                await log.reset_stream("s")
            elif op == "delete":
                await log.delete_stream("s")
            elif op == "close":
                await log.aclose()
                closed = True
            elif op == "read":
                for _ in range(arg):
                    state = attach(stream, 0) if len(readers) < 3 else readers[-1]
                    if isinstance(state, ReaderState):
                        if state not in readers:
                            readers.append(state)
                        next_frames(state, stream, closed)
        except Exception:  # a refused call (finished, deleted, closed) changes nothing
            pass
        stream.readers = len(readers)  # as attached readers do: cleanups keep their markers
        for reader in readers:
            looks += 1
            if settled(reader, stream, closed):
                probe = copy.copy(reader)
                assert next_frames(probe, stream, closed) == ((), False), (op, reader.pos)
                assert (probe.pos, probe.mark, probe.caught_up) == (
                    reader.pos, reader.mark, reader.caught_up)
    return looks


@settings(max_examples=300, deadline=None)
@given(ops=_OPS, trim=st.integers(2, 50))
def test_settled_means_next_frames_gives_nothing(ops: list[tuple[str, int]], trim: int) -> None:
    asyncio.run(_history(ops, trim))


def test_settled_after_catching_up_and_not_after_an_append() -> None:
    async def go() -> None:
        log = MemoryLog()
        await log.create_stream("s")
        stream = log._streams["s"]
        reader = attach(stream, 0)
        assert isinstance(reader, ReaderState)
        stream.readers = 1  # as an attached reader: cleanups keep its marker
        assert not settled(reader, stream)  # caught-up not delivered yet
        next_frames(reader, stream)
        assert settled(reader, stream)
        await log.append("s", 0, b"1")
        assert not settled(reader, stream)
        next_frames(reader, stream)
        assert settled(reader, stream)
        await log.cleanup_to_step("s", 0)  # owed a rewound marker
        assert not settled(reader, stream)
        next_frames(reader, stream)
        assert settled(reader, stream)
        assert not settled(reader, stream, closed=True)
        await log.end_stream("s")
        assert not settled(reader, stream)

    asyncio.run(go())
