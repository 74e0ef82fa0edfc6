"""A FastAPI chat backend in the direct profile (the TRD): one named SSE event per chat event.

    uvicorn examples.direct_chat.app:app        (from the repository root)
    python examples/direct_chat/client.py "What is SSE?"

``POST /chat {"message": "..."}`` streams ``message_start``, a ``progress`` phase, the reply as
``chunk`` events, ``usage`` and ``done``. The "model" echoes the question word by word; put your
model's stream where ``fake_model`` is. A client that disconnects ends the writer with
``done{cancelled}``; a reply still running after 120 s ends with ``done{timeout}``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import anyio
from fastapi import FastAPI
from pydantic import BaseModel

from streamwire import AbortSignal, SSEWritable, StreamWriter, create_sse_writable
from streamwire.chat import Chat, ModelInfo
from streamwire.server import SSEResponse

MODEL: ModelInfo = {"id": "echo-1", "displayName": "Echo", "provider": "local"}

app = FastAPI(title="streamwire direct chat")


class Question(BaseModel):
    message: str


async def fake_model(question: str) -> AsyncIterator[str]:
    """Stands in for an LLM's token stream."""
    for word in f"You asked: {question}".split():
        await anyio.sleep(0.02)
        yield word + " "


@app.post("/chat")
async def chat(question: Question) -> SSEResponse:
    async def produce(writable: SSEWritable, signal: AbortSignal) -> None:
        writer = StreamWriter(writable, Chat, signal=signal)
        user_id, reply_id = str(uuid.uuid4()), str(uuid.uuid4())
        await writer.event(Chat.message_start({"userMessageId": user_id,
                                               "assistantMessageId": reply_id, "model": MODEL}))
        await writer.event(Chat.progress({"chunk": "thinking"}))
        await writer.event(Chat.progress({"done": True}))
        words = 0
        async for token in fake_model(question.message):
            await writer.event(Chat.chunk({"chunk": token}))
            words += 1
        await writer.event(Chat.usage({"inputTokens": len(question.message.split()),
                                       "outputTokens": words, "totalTokens": words}))
        await writer.end("complete", reply_id, user_id)

    return create_sse_writable(produce, timeout=120)
