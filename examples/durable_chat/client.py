"""Ask the durable chat backend a question, then follow the reply's stream (resumable).

    python examples/durable_chat/client.py "What is SSE?"     ($STREAMWIRE_URL: the server)
"""

from __future__ import annotations

import asyncio
import os
import sys

import httpx

from streamwire import AsyncResumableStream, ChunkCodec, is_event
from streamwire.chat import Chat

BASE = os.environ.get("STREAMWIRE_URL", "http://127.0.0.1:8000")


async def main(question: str) -> None:
    codec = ChunkCodec(Chat)
    async with httpx.AsyncClient(base_url=BASE, timeout=30) as client:
        started = await client.post("/chat", json={"message": question})
        started.raise_for_status()
        async with AsyncResumableStream(client, started.json()["sse"],
                                        decode=codec.decode) as stream:
            async for message in stream:
                if message is not None and is_event(message, Chat.chunk):
                    print(message.data["chunk"], end="", flush=True)
        assert stream.end_frame is not None
        print(f"\n[{stream.end_frame.status}]")


if __name__ == "__main__":
    asyncio.run(main(" ".join(sys.argv[1:]) or "What is SSE?"))
