"""A producer in its own process: writes a chat reply to a stream server over HTTP.

    STREAMWIRE_TOKEN=... python examples/producer_process/producer.py URL STREAM_ID [WORDS...]

It creates the stream (``PUT``, idempotent), appends one chunk per word (``POST /chunks``, each a
chat ``chunk`` message inside the chunk JSON), then ends it (``POST /end``). Any process that can
reach the server can produce: a worker, a cron job, another service.
"""

from __future__ import annotations

import json
import os
import sys
import time

import httpx

from streamwire import ChunkCodec
from streamwire.chat import Chat


def produce(base: str, stream_id: str, words: list[str], *, delay: float = 0.05) -> None:
    codec = ChunkCodec(Chat)
    headers = {"Authorization": f"Bearer {os.environ['STREAMWIRE_TOKEN']}"}
    stream = f"{base}/streams/{stream_id}"
    with httpx.Client(headers=headers, timeout=10) as client:
        client.put(stream).raise_for_status()
        for word in words:
            chunk = json.loads(codec.encode(Chat.chunk({"chunk": word + " "})))
            client.post(f"{stream}/chunks", json=[{"step": 1, "chunk": chunk}]).raise_for_status()
            time.sleep(delay)  # a model takes its time between tokens
        client.post(f"{stream}/end", json={"status": "completed"}).raise_for_status()
    print(f"producer: wrote {len(words)} chunks to {stream_id} and ended it", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    produce(sys.argv[1], sys.argv[2], sys.argv[3:] or ["a", "reply", "from", "another", "process"])
