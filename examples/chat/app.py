"""A chat page on streamwire: FastAPI serves one page, streamwire serves the demo agent's replies
at ``/api/chat`` (the AI SDK's UI message stream), resumable after a reload.

    uvicorn app:app --app-dir examples/chat      # then open http://127.0.0.1:8000/

Zero configuration: replies live in this process's memory. Optional environment variables make it
durable, as ``streamwire serve``'s flags of the same names do:

``STREAMWIRE_LOG``             ``memory`` (default), ``sqlite:PATH`` or ``redis://HOST:PORT/DB``:
                               where replies are kept (the parser ``streamwire serve --log`` uses).
                               With SQLite or Redis a reply outlives the process: the page
                               re-attaches to it after a restart.
``STREAMWIRE_RUN_RETRIES``     times a reply whose server was lost (killed) or shut down is
                               written again, from its start, by a live process on the same log
                               (default 0). A restarted server is such a process: a reply cut off
                               by ``kill -9`` and a restart ends complete.
``STREAMWIRE_RUN_LEASE``       seconds after which a dead server's replies count as lost (default:
                               half the writer timeout, at most 30).
``STREAMWIRE_WRITER_TIMEOUT``  seconds a reply's writer may stay silent before its stream fails
                               (default: the log's, 30).

    STREAMWIRE_LOG=sqlite:chat.db STREAMWIRE_RUN_RETRIES=1 uvicorn app:app --app-dir examples/chat

Swap ``demo`` for your own agent (``async def agent(run: RunContext[Chat]) -> ...``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from starlette.exceptions import HTTPException
from starlette.requests import Request

from streamwire.cli.serve import open_log
from streamwire.runs import Runs
from streamwire.runs.demo_agent import demo
from streamwire.server import create_app

PAGE = Path(__file__).with_name("index.html")


def _setting(name: str, kind: type[float] | type[int]) -> Any:
    """The environment variable ``name`` as a number >= 0 (``None`` when unset or empty)."""
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        value = kind(text)
    except ValueError:
        raise RuntimeError(f"{name} must be a {kind.__name__}, not {text!r}") from None
    if value < 0:
        raise RuntimeError(f"{name} must be 0 or more, not {text!r}")
    return value


def authorize(request: Request, name: str, access: str) -> None:
    """Anyone who opens the page may chat (a demo); every other write is refused."""
    if access == "write" and not request.url.path.startswith("/api/chat"):
        raise HTTPException(403, "this demo only takes chat messages")


log = open_log(os.environ.get("STREAMWIRE_LOG", "").strip() or "memory",
               writer_timeout=_setting("STREAMWIRE_WRITER_TIMEOUT", float))
runs = Runs(log, [demo], lease_time=_setting("STREAMWIRE_RUN_LEASE", float),
            run_retries=_setting("STREAMWIRE_RUN_RETRIES", int) or 0)
stream_app = create_app(log, authorize=authorize, agents=runs, chat_agent="demo")


@contextlib.asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    # A mounted app gets no lifespan of its own: run streamwire's (it runs the agents, and drains
    # the open replies at shutdown), inside the log's (SQLite and Redis open and close theirs).
    async with contextlib.AsyncExitStack() as stack:
        if hasattr(log, "__aenter__"):
            await stack.enter_async_context(log)  # type: ignore[arg-type]
        else:
            stack.push_async_callback(log.aclose)
        await stack.enter_async_context(stream_app.lifespan())
        yield


app = FastAPI(lifespan=lifespan)


@app.get("/", response_class=HTMLResponse)
async def page() -> str:
    return PAGE.read_text()


app.mount("/", stream_app)
