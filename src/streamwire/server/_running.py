"""Running a ``StreamApp`` under uvicorn so that a signal drains its streams first."""

from __future__ import annotations

import asyncio
import math
import socket
from types import FrameType
from typing import TYPE_CHECKING, Any

import uvicorn

if TYPE_CHECKING:
    from ._app import StreamApp

__all__ = ["DrainingServer", "uvicorn_server"]


class DrainingServer(uvicorn.Server):
    """A ``uvicorn.Server`` that drains its ``StreamApp`` as soon as it is told to exit.

    uvicorn waits for every connection to close before it sends lifespan shutdown, so an open SSE
    stream would hold it forever; here SIGINT / SIGTERM (or ``handle_exit`` called from any thread)
    first ends every stream with its recoverable ``fail`` frame.
    """

    def __init__(self, config: uvicorn.Config, app: StreamApp) -> None:
        super().__init__(config)
        self.stream_app = app
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.stream_app.begin_shutdown)


def uvicorn_server(app: StreamApp, *, host: str = "127.0.0.1", port: int = 8000,
                   **config: Any) -> DrainingServer:
    """A ``DrainingServer`` for ``app``; ``config`` goes to ``uvicorn.Config``. By default uvicorn
    also cancels whatever is left ``shutdown_grace_period`` seconds after the signal."""
    config.setdefault("timeout_graceful_shutdown", max(1, math.ceil(app.grace_period)))
    return DrainingServer(uvicorn.Config(app, host=host, port=port, **config), app)
