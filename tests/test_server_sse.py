"""``StreamSource`` (``server/_sse.py``) releases the log reader it ran, and only that: a
connection that joined its stream's hub without reading (``Fanout.prepare``) has a reader whose
code never started, and the engine skips its shielded close (``Source.holds``)."""

from __future__ import annotations

from typing import Any

import pytest

from streamwire.frames import StreamFrame
from streamwire.log.memory import MemoryLog
from streamwire.server._asgi import Message
from streamwire.server._engine import MORE, Connection
from streamwire.server._sse import StreamSource

pytestmark = pytest.mark.anyio


async def test_a_reader_that_ran_is_closed_and_one_that_never_ran_holds_nothing() -> None:
    log = MemoryLog()
    await log.create_stream("s")
    await log.append("s", 0, b'"a"')
    idle = StreamSource(log.read("s", 0), expose_errors=False)
    assert not idle.holds()
    ran = StreamSource(log.read("s", 0), expose_errors=False)
    conn = Connection("s", 0, "-")
    written: list[Message] = []

    async def send(message: Message) -> None:
        written.append(message)

    conn.send = send
    assert await ran.pump(conn, None) == MORE  # the first frame only: the reader is parked
    assert b'"a"' in written[0]["body"]
    stream = log._get("s")
    assert stream.readers == 1
    assert ran.holds()
    await ran.aclose()
    assert stream.readers == 0  # its ``finally`` ran
    await idle.aclose()
    assert stream.readers == 0
    await log.aclose()


async def test_a_reader_that_is_not_an_async_generator_is_always_closed() -> None:
    closed: list[bool] = []

    class Frames:
        """An ``AsyncIterator`` of a log of someone else's: it may hold a resource from birth."""

        def __aiter__(self) -> Frames:
            return self

        async def __anext__(self) -> StreamFrame:
            raise StopAsyncIteration

        async def aclose(self) -> Any:
            closed.append(True)

    source = StreamSource(Frames(), expose_errors=False)
    assert source.holds()
    await source.aclose()
    assert closed == [True]
