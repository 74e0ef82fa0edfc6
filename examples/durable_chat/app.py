"""A FastAPI chat backend in the durable profile (wire v2): replies survive disconnects, reloads
and restarts of the reader.

    uvicorn examples.durable_chat.app:app       (from the repository root)
    python examples/durable_chat/client.py "What is SSE?"

``POST /chat {"message": "..."}`` creates a stream, starts the reply in a background task that
appends each token to the log as a chat ``chunk`` message, and answers at once with the stream's
URL. Readers follow ``GET /streams/{id}/sse`` (the stream server mounted at ``/``): a reader that
loses its connection re-attaches with ``Last-Event-ID`` and gets every chunk once, in order, while
the reply goes on without it. HTTP writes are refused (this app writes its own streams through the
log); reads are open.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator

import anyio
from anyio.abc import TaskGroup
from fastapi import FastAPI
from pydantic import BaseModel
from starlette.exceptions import HTTPException
from starlette.requests import Request

from streamwire import ChunkCodec, create_app
from streamwire.chat import Chat
from streamwire.log.memory import MemoryLog  # SQLiteLog("chat.db") or RedisLog(url) to persist

log = MemoryLog()
codec = ChunkCodec(Chat)


def reads_only(request: Request, stream_id: str, access: str) -> None:
    if access == "write":
        raise HTTPException(403, "replies are written by POST /chat only")


stream_app = create_app(log, authorize=reads_only)
replies: TaskGroup | None = None


@contextlib.asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    global replies
    async with log, anyio.create_task_group() as tasks:
        replies = tasks
        yield
        await stream_app.drain()  # open readers get a recoverable fail and re-attach elsewhere
        tasks.cancel_scope.cancel()


app = FastAPI(title="streamwire durable chat", lifespan=lifespan)


class Question(BaseModel):
    message: str


async def fake_model(question: str) -> AsyncIterator[str]:
    """Stands in for an LLM's token stream."""
    for word in f"You asked: {question}".split():
        await anyio.sleep(0.02)
        yield word + " "


async def reply(stream_id: str, question: str) -> None:
    """The producer: one step (one model call), its tokens as chunks, then exactly one terminal."""
    try:
        async for token in fake_model(question):
            await log.append(stream_id, 1, codec.encode(Chat.chunk({"chunk": token})))
    except Exception:
        await log.fail_stream(stream_id, "the model failed", recoverable=False)
        raise
    await log.end_stream(stream_id, "completed")


@app.post("/chat")
async def chat(question: Question) -> dict[str, str]:
    assert replies is not None, "the app's lifespan is not running"
    stream_id = f"reply-{uuid.uuid4().hex}"
    await log.create_stream(stream_id)
    replies.start_soon(reply, stream_id, question.message)
    return {"streamId": stream_id, "sse": f"/streams/{stream_id}/sse"}


app.mount("/", stream_app)  # after the routes above: /chat is FastAPI's, /streams/... streamwire's
