"""A chat app on streamwire with the AI SDK's own React ``useChat``: FastAPI serves the page built
with vite (``web/`` -> ``web/dist/``), streamwire serves the demo agent's replies at ``/api/chat``
(the AI SDK's UI message stream), resumable after a reload.

    npm ci && npm run build:react                   # once, and after editing web/
    uvicorn app:app --app-dir examples/react_chat   # then open http://127.0.0.1:8000/

With ``STREAMWIRE_TOKEN`` set, every chat request needs ``Authorization: Bearer <that token>``
(the page has a token field); without it anyone who opens the page may chat. With
``STREAMWIRE_JWT_SECRET`` set instead, callers are users: each signs in with a JWT (``streamwire
token --sub NAME``) and sees only the threads they started, from any browser. Swap ``demo`` for
your own agent and ``MemoryLog`` for ``SQLiteLog``/``RedisLog`` to keep replies across restarts.

With ``OPENAI_BASE_URL`` (a local vLLM, llama.cpp server or Ollama: ``http://127.0.0.1:11434/v1``)
or ``OPENAI_API_KEY`` set, the replies come from a real model instead (``model_agent.py``:
``OPENAI_MODEL`` names it), with a weather tool and a ``delete_file`` tool the user approves on
the page. It needs ``pip install 'streamwire[openai]'``.
"""

from __future__ import annotations

import hmac
import html
import inspect
import os
import sys
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, HTMLResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException
from starlette.requests import Request

from streamwire.log.memory import MemoryLog
from streamwire.runs import Agent
from streamwire.runs.demo_agent import demo
from streamwire.server import Access, User, create_app, jwt_bearer

DIST = Path(__file__).with_name("web") / "dist"
TOKEN = os.environ.get("STREAMWIRE_TOKEN") or None
_SECRET = os.environ.get("STREAMWIRE_JWT_SECRET")
#: Who the caller is, from a JWT (with ``STREAMWIRE_JWT_SECRET``): each thread is its creator's.
USERS = jwt_bearer(_SECRET) if _SECRET else None


async def authorize(request: Request, name: str, access: Access) -> User | str | None:
    """Chat requests only (with the bearer token when ``STREAMWIRE_TOKEN`` is set); the caller
    is the user when ``USERS`` reads JWTs."""
    user: User | str | None = None
    if USERS is not None:
        found = USERS(request, name, access)
        user = await found if inspect.isawaitable(found) else found
    elif TOKEN is not None:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.encode(), TOKEN.encode()):
            raise HTTPException(401, "a bearer token is needed")
    if access == "write" and not request.url.path.startswith("/api/chat"):
        raise HTTPException(403, "this example only takes chat messages")
    return user


def _agent() -> Agent:
    """The demo agent (no model), or with ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` set the model
    agent of ``model_agent.py``: any OpenAI-compatible server, its tools and approvals."""
    if not (os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY")):
        return demo
    sys.path.insert(0, str(Path(__file__).parent))  # run as a module of uvicorn --app-dir
    from model_agent import assistant

    return assistant


AGENT = _agent()
stream_app = create_app(MemoryLog(), authorize=authorize, agents=[AGENT],
                        chat_agent=AGENT.__name__)

# A mounted app gets no lifespan of its own: run streamwire's (it runs the agents, and drains the
# open replies at shutdown).
app = FastAPI(lifespan=stream_app.lifespan)

_MISSING = """<!doctype html><meta charset="utf-8"><title>Build the page first</title>
<body style="font: 16px/1.5 system-ui, sans-serif; max-width: 40rem; margin: 4rem auto">
<h1>The page is not built</h1>
<p>There is no <code>{dist}</code>. From the repository root run</p>
<pre>npm ci
npm run build:react</pre>
<p>then reload this page.</p>"""


@app.get("/", response_model=None)
async def page() -> Response:
    index = DIST / "index.html"
    if not index.is_file():
        return HTMLResponse(_MISSING.format(dist=html.escape(str(index))), status_code=503)
    return FileResponse(index, headers={"cache-control": "no-cache"})


# vite names the assets by their content hash (check_dir=False: the build may come later)
app.mount("/assets", StaticFiles(directory=DIST / "assets", check_dir=False), name="assets")

app.mount("/", stream_app)
