"""Running a ``StreamApp`` under uvicorn so that a signal drains its streams first."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import uvicorn

from .._compat.uvicorn import ExitHookServer

if TYPE_CHECKING:
    from ._app import StreamApp

__all__ = ["DrainingServer", "uvicorn_server"]


class DrainingServer(ExitHookServer):
    """A ``uvicorn.Server`` that drains its ``StreamApp`` as soon as it is told to exit.

    uvicorn waits for every connection to close before it sends lifespan shutdown, so an open SSE
    stream would hold it forever; here SIGINT / SIGTERM (or ``handle_exit`` called from any thread)
    first ends every stream with its recoverable ``fail`` frame (the override of uvicorn's
    ``handle_exit`` is ``_compat.uvicorn``'s, checked at construction).
    """

    def __init__(self, config: uvicorn.Config, app: StreamApp) -> None:
        super().__init__(config, app.begin_shutdown)
        self.stream_app = app


def uvicorn_server(app: StreamApp, *, host: str = "127.0.0.1", port: int = 8000,
                   **config: Any) -> DrainingServer:
    """A ``DrainingServer`` for ``app``; ``config`` goes to ``uvicorn.Config``. By default uvicorn
    also cancels whatever is left ``shutdown_grace_period`` seconds after the signal."""
    config.setdefault("timeout_graceful_shutdown", max(1, math.ceil(app.grace_period)))
    return DrainingServer(uvicorn.Config(app, host=host, port=port, **config), app)
