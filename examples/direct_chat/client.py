"""Ask the direct chat backend a question and print the reply as it streams.

    python examples/direct_chat/client.py "What is SSE?"      ($STREAMWIRE_URL: the server)
"""

from __future__ import annotations

import asyncio
import os
import sys

import httpx

from streamwire import StreamReader, create_sse_readable
from streamwire.chat import Chat

BASE = os.environ.get("STREAMWIRE_URL", "http://127.0.0.1:8000")


async def main(question: str) -> None:
    async with httpx.AsyncClient(timeout=30) as client, client.stream(
            "POST", f"{BASE}/chat", json={"message": question}) as response:
        await (
            StreamReader(create_sse_readable(response), Chat)
            .on(Chat.message_start, lambda d: print(f"[{d['model']['displayName']}] ", end=""))
            .on(Chat.chunk, lambda d: print(d["chunk"], end="", flush=True))
            .on(Chat.usage, lambda d: print(f"\n({d['outputTokens']} tokens)", end=""))
            .on(Chat.done, lambda d: print(f"\n[{d['reason']}]"))
            .on(Chat.error, lambda d: print(f"\n[error: {d['message']}]"))
            .consume()
        )


if __name__ == "__main__":
    asyncio.run(main(" ".join(sys.argv[1:]) or "What is SSE?"))
