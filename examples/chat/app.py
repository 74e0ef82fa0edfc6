"""A chat page on streamwire: FastAPI serves one page, streamwire serves the demo agent's replies
at ``/api/chat`` (the AI SDK's UI message stream), resumable after a reload.

    uvicorn app:app --app-dir examples/chat      # then open http://127.0.0.1:8000/

Swap ``demo`` for your own agent (``async def agent(run: RunContext[Chat]) -> ...``) and
``MemoryLog`` for ``SQLiteLog``/``RedisLog`` to keep replies across restarts and processes.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from starlette.exceptions import HTTPException
from starlette.requests import Request

from streamwire.log.memory import MemoryLog
from streamwire.runs.demo_agent import demo
from streamwire.server import create_app

PAGE = Path(__file__).with_name("index.html")


def authorize(request: Request, name: str, access: str) -> None:
    """Anyone who opens the page may chat (a demo); every other write is refused."""
    if access == "write" and not request.url.path.startswith("/api/chat"):
        raise HTTPException(403, "this demo only takes chat messages")


stream_app = create_app(MemoryLog(), authorize=authorize, agents=[demo], chat_agent="demo")


# A mounted app gets no lifespan of its own: run streamwire's (it runs the agents, and drains the
# open replies at shutdown).
app = FastAPI(lifespan=stream_app.lifespan)


@app.get("/", response_class=HTMLResponse)
async def page() -> str:
    return PAGE.read_text()


app.mount("/", stream_app)
