"""Two stream servers on one Redis: a writer on one, a reader on the other.

    python examples/redis_two_servers/run.py [redis://127.0.0.1:6379/0]

Starts two ``streamwire serve --log redis://...`` processes (free ports, one token, a key prefix
of their own), writes a reply through server A with ``producer.py`` (a third process) and reads it
live through server B: Redis pub/sub carries each chunk from A's append to B's reader. Then both
servers stop. This is the many-hosts deployment: put any number of servers behind a load
balancer, and any of them serves any stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import subprocess
import sys
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from serving import free_port, read, stream_server  # noqa: E402  (examples/serving.py)

WORDS = ["written", "through", "server", "A", "and", "read", "through", "server", "B"]


def main(redis_url: str) -> None:
    token = secrets.token_urlsafe(16)
    prefix = f"example-{secrets.token_hex(4)}"  # this run's keys only
    with contextlib.ExitStack() as servers:
        a = servers.enter_context(stream_server(redis_url, token, free_port(), redis_prefix=prefix))
        b = servers.enter_context(stream_server(redis_url, token, free_port(), redis_prefix=prefix))
        print(f"server A: {a}\nserver B: {b}")
        stream_id = f"reply-{secrets.token_hex(4)}"
        httpx.put(f"{a}/streams/{stream_id}", headers={"Authorization": f"Bearer {token}"},
                  timeout=10).raise_for_status()
        producer = subprocess.Popen(
            [sys.executable, str(HERE.parent / "producer_process" / "producer.py"), a,
             stream_id, *WORDS], env={**os.environ, "STREAMWIRE_TOKEN": token})
        try:
            text = asyncio.run(read(b, stream_id, producer))
        finally:
            producer.wait(30)
    assert text.split() == WORDS, text
    assert producer.returncode == 0


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "redis://127.0.0.1:6379/0")
