"""``StreamSource`` (``server/_sse.py``) releases the log reader it ran, and only that: a
connection that joined its stream's hub without reading (``Fanout.prepare``) has a reader whose
code never started, and the engine skips its shielded close (``Source.holds``); the reader of the
connection that formed its hub is the hub's to close, whenever a shutdown lands."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import httpx
import pytest

from helpers.server import append, next_frame, serving, sse, wait_for
from streamwire.frames import CaughtUpFrame, ChunkFrame, FailFrame, StreamFrame
from streamwire.log.memory import MemoryLog
from streamwire.server._asgi import Message
from streamwire.server._engine import MORE, Connection
from streamwire.server._fanout import Fanout
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



#: When the shutdown lands, counted from the first reader forming its hub: in the same step
#: (before the hub's task took its first), or that many loop steps later.
LANDINGS = ("now", 0, 1, 2, 3, 4, 5)


@pytest.mark.parametrize("landing", LANDINGS)
async def test_a_shutdown_landing_as_the_first_reader_forms_its_hub_still_ends_its_body(
        monkeypatch: pytest.MonkeyPatch, landing: str | int) -> None:
    """The first reader of a live stream hands its own log reader to the hub it forms
    (``Follower.took``). A shutdown landing while its connection's task is still leaving its solo
    phase removes it from the hub, whose task may be inside that reader: the reader is still the
    hub's to close (closed by the connection, it raised "aclose(): asynchronous generator is
    already running", the response was cut off and the client saw an incomplete chunked body).
    Whenever the shutdown lands, the reader gets its ``fail`` and a complete body, and the log's
    reader is closed."""
    joined: list[bool] = []
    with serving(MemoryLog) as srv:
        join = Fanout.join

        def join_then_shut_down(self: Fanout, *args: Any) -> Any:
            follower = join(self, *args)
            if follower is not None and follower.took:
                joined.append(True)
                if landing == "now":
                    srv.app.begin_shutdown()
                else:
                    loop = asyncio.get_running_loop()

                    def later(steps: int) -> None:
                        if steps:
                            loop.call_soon(later, steps - 1)
                        else:
                            srv.app.begin_shutdown()

                    loop.call_soon(later, landing)
            return follower

        monkeypatch.setattr(Fanout, "join", join_then_shut_down)
        async with httpx.AsyncClient(base_url=srv.base, timeout=10) as client:
            await client.put("/streams/s")
            await append(client, "s", "a")
            async with sse(client, "s") as (_, items):
                assert isinstance(await next_frame(items), ChunkFrame)
                assert await next_frame(items) == CaughtUpFrame(head=1)
                frame = await next_frame(items)
                assert isinstance(frame, FailFrame)
                assert frame.error_detail == {"code": "SERVER_SHUTDOWN"}
                with anyio.fail_after(10):
                    assert [item async for item in items if not isinstance(item, str)] == []
        log = srv.app.log
        assert isinstance(log, MemoryLog)
        await wait_for(lambda: log._get("s").readers == 0, limit=5)
    assert joined == [True]
