"""Static checks of ``StreamApp.lifespan`` as a host's lifespan (FastAPI, Starlette).

Checked by mypy and pyright (see ``pyproject.toml`` here), never run. Each negative line carries the
exact code of both checkers, so an error that disappears fails the run.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator

from fastapi import FastAPI
from starlette.applications import Starlette

from streamwire.chat import Chat
from streamwire.log.memory import MemoryLog
from streamwire.runs import RunContext
from streamwire.server import StreamApp, create_app


async def agent(run: RunContext[Chat]) -> None:
    return None


stream_app: StreamApp = create_app(MemoryLog(), token="t0ken", agents=[agent])

# the app's own lifespan, handed to the host as it is
host = FastAPI(lifespan=stream_app.lifespan)
host.mount("/", stream_app)
Starlette(lifespan=stream_app.lifespan)


# or entered inside the host's own lifespan
@contextlib.asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncGenerator[None]:
    async with stream_app.lifespan(app):
        yield


FastAPI(lifespan=lifespan)

# what a lifespan is not: a coroutine, or a context manager already entered
FastAPI(lifespan=stream_app.drain)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
FastAPI(lifespan=stream_app.lifespan(host))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
