"""A log served over real sockets, with a hook that cuts the connections, and the contract's case
"a body that ends without a terminal frame is a drop" (the wire v2 seed,
``../shared/seeds/000_e7e163321047a0a9.txt``: "EOF with no terminal frame -> drop: throws the
typed, retryable StreamDropError -- never a clean end")."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncGenerator
from typing import Any, final

import anyio
import anyio.abc
import httpx
import pytest
import sniffio

from ..errors import RetriesExhaustedError, StreamDropError
from ..frames import (
    CaughtUpFrame,
    EndFrame,
    FrameDecoder,
    StreamFrame,
    TerminalAction,
    UnknownFrame,
    classify_stream_terminal,
)
from ..log import StreamLog
from ._helpers import GUARD, chunk_of, chunk_seqs, fill, terminals

__all__ = ["ServedLog", "WireContract", "serve_log"]


async def _pump(src: anyio.abc.SocketStream, dst: anyio.abc.SocketStream,
                scope: anyio.CancelScope) -> None:
    try:
        async for data in src:
            await dst.send(data)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
    scope.cancel()  # one side is done: so is the relayed connection


@final
class ServedLog:
    """A log behind the stream server (uvicorn on 127.0.0.1) and a TCP relay in front of it.

    ``url`` is the relay's. ``cut()`` closes every relayed connection at once, as a server crash
    or an eviction would: the reader's body ends with no terminal frame, and the server sees its
    client vanish. After ``cut(refuse=True)`` new connections are closed as soon as they open.
    """

    def __init__(self, upstream_port: int) -> None:
        self._upstream_port = upstream_port
        self._scopes: set[anyio.CancelScope] = set()
        self.url = ""
        self.refuse = False
        self.cuts = 0

    def cut(self, *, refuse: bool = False) -> None:
        """Close every relayed connection now (and, with ``refuse``, every later one)."""
        self.refuse = refuse
        self.cuts += 1
        for scope in list(self._scopes):
            scope.cancel()

    async def _relay(self, client: anyio.abc.SocketStream) -> None:
        async with client:
            if self.refuse:
                return
            with anyio.CancelScope() as scope:
                self._scopes.add(scope)
                try:
                    upstream = await anyio.connect_tcp("127.0.0.1", self._upstream_port)
                    async with upstream, anyio.create_task_group() as group:
                        group.start_soon(_pump, client, upstream, group.cancel_scope)
                        group.start_soon(_pump, upstream, client, group.cancel_scope)
                finally:
                    self._scopes.discard(scope)


@contextlib.asynccontextmanager
async def serve_log(log: StreamLog, **app_options: Any) -> AsyncGenerator[ServedLog]:
    """Serve ``log`` with ``streamwire.server.create_app(log, **app_options)`` on real uvicorn
    (asyncio only) behind a cuttable relay; stop both on exit (the log stays open). Writes are open
    to anyone (``allow_anonymous_writes=True``) unless ``app_options`` say otherwise: the server
    listens on 127.0.0.1 for the test only."""
    from ..server import create_app, uvicorn_server  # the web stack loads only when used

    if "authorize" not in app_options and "token" not in app_options:
        app_options.setdefault("allow_anonymous_writes", True)
    app = create_app(log, **app_options)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn_server(app, port=sock.getsockname()[1], log_config=None, lifespan="off")
    served = ServedLog(sock.getsockname()[1])
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    served.url = f"http://127.0.0.1:{listener.extra(anyio.abc.SocketAttribute.local_port)}"
    relaying = anyio.CancelScope()

    async def relay() -> None:
        with relaying:
            await listener.serve(served._relay)  # pyright: ignore[reportPrivateUsage]

    try:
        async with anyio.create_task_group() as group:  # exits once uvicorn has stopped
            group.start_soon(server.serve, [sock])
            group.start_soon(relay)
            try:
                with anyio.fail_after(GUARD):
                    while not server.started:  # noqa: ASYNC110 - uvicorn sets a flag, no event
                        await anyio.sleep(0.01)
                yield served
            finally:
                served.cut(refuse=True)
                relaying.cancel()
                server.should_exit = True
    finally:
        await listener.aclose()
        sock.close()


class WireContract:
    """The log through the stream server and a real reader: a cut is a drop, never an end."""

    async def test_eof_without_a_terminal_is_a_drop(self, log: StreamLog) -> None:
        if sniffio.current_async_library() != "asyncio":
            pytest.skip("uvicorn serves on asyncio only")
        await log.create_stream("s")
        await fill(log, "s", [0, 0, 0])
        async with serve_log(log) as served, httpx.AsyncClient(base_url=served.url) as client:
            # a raw SSE reader: the body ends, after the cut, with no terminal frame
            decoder = FrameDecoder()
            got: list[StreamFrame | UnknownFrame] = []
            with anyio.fail_after(GUARD):
                async with client.stream("GET", "/streams/s/sse") as resp:
                    assert resp.status_code == 200
                    with contextlib.suppress(httpx.TransportError):  # a chunked body cut short
                        async for piece in resp.aiter_raw():
                            got.extend(decoder.feed(piece))
                            if CaughtUpFrame(3) in got and not served.cuts:
                                served.cut()
            got.extend(decoder.flush())
            frames = [f for f in got if not isinstance(f, UnknownFrame)]
            assert served.cuts == 1
            assert chunk_seqs(frames) == [1, 2, 3]
            assert frames[-1] == CaughtUpFrame(3)
            found = terminals(frames)
            assert found == []
            ending = found[-1] if found else "eof"
            assert classify_stream_terminal(ending) is TerminalAction.DROP  # type: ignore[arg-type]
            await self._client_sees_a_drop(log, served, client)

    async def _client_sees_a_drop(self, log: StreamLog, served: ServedLog,
                                  client: httpx.AsyncClient) -> None:
        from ..client import AsyncResumableStream, RetryPolicy

        # the resumable client that may not re-attach: the cut surfaces as StreamDropError
        async def read_until_the_cut() -> None:
            async with AsyncResumableStream(
                    client, "/streams/s/sse",
                    retry=RetryPolicy(max_attempts=1, backoff_initial=0)) as stream:
                with anyio.fail_after(GUARD):
                    async for chunk in stream:
                        if chunk.sequence == 3:
                            served.cut(refuse=True)

        with pytest.raises(RetriesExhaustedError) as caught:
            await read_until_the_cut()
        assert isinstance(caught.value.last_error, StreamDropError)
        # one that may: it re-attaches from its cursor; nothing lost, nothing twice
        served.refuse = False
        errors: list[BaseException] = []
        delivered: list[int] = []
        async with AsyncResumableStream(
                client, "/streams/s/sse", retry=RetryPolicy(backoff_initial=0.01),
                on_reattach=lambda error, _: errors.append(error)) as stream:
            with anyio.fail_after(GUARD):
                async for chunk in stream:
                    delivered.append(chunk.sequence)
                    if chunk.sequence == 3:
                        served.cut()
                        await log.append("s", 0, chunk_of(4))
                        await log.end_stream("s")
        assert delivered == [1, 2, 3, 4]
        assert [type(error) for error in errors] == [StreamDropError]
        assert stream.end_frame == EndFrame("completed")
