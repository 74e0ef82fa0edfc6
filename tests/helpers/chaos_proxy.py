"""A TCP proxy on 127.0.0.1 that mistreats the server-to-client direction (asyncio streams).

Each connection gets a random byte budget; the proxy forwards the response in random small pieces,
stalls now and then, and when the budget runs out it forwards exactly up to that byte and closes
both sides (a cut at a random offset, mid-frame or mid-header alike). Requests pass unchanged.
Everything random comes from one ``random.Random(seed)`` so a failing run can be replayed.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ChaosConfig:
    """How hard the proxy shakes the stream. Budgets and pieces are in bytes, stalls in seconds."""

    min_budget: int = 200
    max_budget: int = 6000
    max_piece: int = 700
    stall_probability: float = 0.01
    max_stall: float = 0.03
    #: Stop cutting after this many cuts (None: never stop).
    max_cuts: int | None = None


@dataclass
class ChaosProxy:
    """``async with ChaosProxy(port, seed=...) as proxy:`` listens on ``proxy.port``."""

    upstream_port: int
    seed: int
    config: ChaosConfig = field(default_factory=ChaosConfig)
    cuts: int = 0
    connections: int = 0
    _rng: random.Random = field(init=False)
    _server: asyncio.Server | None = field(init=False, default=None)
    _tasks: set[asyncio.Task[Any]] = field(init=False, default_factory=set)
    port: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        #: Set at the first cut.
        self.first_cut = asyncio.Event()

    async def __aenter__(self) -> ChaosProxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        # A handler cancelled by __aexit__ ends normally: asyncio's server callback would log a
        # cancelled handler as an error.
        with contextlib.suppress(asyncio.CancelledError):
            await self._relay(reader, writer, task)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     task: asyncio.Task[Any]) -> None:
        try:
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
            except OSError:
                return  # server down (restart test): the client sees a bare close
            cfg = self.config
            cutting = cfg.max_cuts is None or self.cuts < cfg.max_cuts
            budget = self._rng.randint(cfg.min_budget, cfg.max_budget) if cutting else -1
            upward = asyncio.ensure_future(self._pipe(reader, up_writer))
            try:
                await self._down(up_reader, writer, budget)
            finally:
                upward.cancel()
                with contextlib.suppress(BaseException):
                    await upward
                up_writer.transport.abort()
        finally:
            writer.transport.abort()
            self._tasks.discard(task)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while (data := await reader.read(65536)) and not writer.transport.is_closing():
                writer.write(data)
                await writer.drain()

    async def _down(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    budget: int) -> None:
        cfg, rng = self.config, self._rng
        sent = 0
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                view = memoryview(data)
                while view:
                    if writer.transport.is_closing():  # the client left
                        return
                    size = min(len(view), rng.randint(1, cfg.max_piece))
                    if budget >= 0 and sent + size >= budget:
                        writer.write(view[: budget - sent])
                        await writer.drain()
                        self.cuts += 1
                        self.first_cut.set()
                        return
                    writer.write(view[:size])
                    await writer.drain()
                    sent += size
                    view = view[size:]
                    if rng.random() < cfg.stall_probability:
                        await asyncio.sleep(rng.uniform(0, cfg.max_stall))


class ServerThread:
    """Run an ASGI app under real uvicorn on 127.0.0.1 (port 0 unless given) in a thread.

    ``with ServerThread(app) as server:`` then ``server.url``; leaving stops it.
    """

    def __init__(self, app: object, *, port: int = 0) -> None:
        import uvicorn

        self._config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",  # type: ignore[arg-type]
                                      lifespan="on", timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(self._config)
        self._thread: threading.Thread | None = None
        self.port = port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ServerThread:
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        assert self._thread is not None
        self._thread.join(10)
