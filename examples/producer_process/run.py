"""A stream server, a producer in another process, and a reader in this one.

    python examples/producer_process/run.py

Starts ``streamwire serve --log sqlite:...`` (a subprocess, a fresh SQLite file, a random free
port and token), starts ``producer.py`` in a second process, and reads the reply here with
``AsyncResumableStream`` while it is written. Stops the server when the reply is complete.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from serving import free_port, read, stream_server  # noqa: E402  (examples/serving.py)

WORDS = ["every", "chunk", "once", "and", "in", "order", "even", "across", "processes"]


def main() -> None:
    token = secrets.token_urlsafe(16)
    with tempfile.TemporaryDirectory() as tmp, stream_server(
            f"sqlite:{tmp}/streams.db", token, free_port()) as url:
        stream_id = f"reply-{secrets.token_hex(4)}"
        httpx.put(f"{url}/streams/{stream_id}", headers={"Authorization": f"Bearer {token}"},
                  timeout=10).raise_for_status()  # created first, so the reader can attach now
        producer = subprocess.Popen([sys.executable, str(HERE / "producer.py"), url, stream_id,
                                     *WORDS], env={**os.environ, "STREAMWIRE_TOKEN": token})
        try:
            text = asyncio.run(read(url, stream_id, producer))
        finally:
            producer.wait(30)
    assert text.split() == WORDS, text
    assert producer.returncode == 0


if __name__ == "__main__":
    main()
