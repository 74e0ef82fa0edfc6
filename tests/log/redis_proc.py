"""Subprocess roles for the many-process Redis tests .

``python tests/log/redis_proc.py write URL PREFIX STREAM COUNT DELAY``
    creates the stream (idempotent), appends COUNT chunks ``{"i": k}`` (step k // 10), sleeping
    DELAY seconds between appends, then ends it; prints ``{"head": N}``.
``python tests/log/redis_proc.py read URL PREFIX STREAM CURSOR STOP_AFTER``
    reads from CURSOR and prints one JSON line per frame: ``{"seq": n, "i": k}`` for a chunk,
    ``{"caught_up": head}``, ``{"end": status}``; with STOP_AFTER > 0 it leaves after that many
    chunks and prints ``{"left_at": cursor}``.
"""

from __future__ import annotations

import asyncio
import json
import sys

import msgspec

from streamwire.frames import CaughtUpFrame, ChunkFrame, EndFrame
from streamwire.log.redis import RedisLog


def _out(obj: object) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def _write(log: RedisLog, stream: str, count: int, delay: float) -> None:
    await log.create_stream(stream)
    for k in range(count):
        await log.append(stream, k // 10, msgspec.json.encode({"i": k}))
        if delay:
            await asyncio.sleep(delay)
    await log.end_stream(stream, "completed")
    _out({"head": (await log.info(stream)).head})


async def _read(log: RedisLog, stream: str, cursor: int, stop_after: int) -> None:
    taken = 0
    async for frame in log.read(stream, cursor):
        if isinstance(frame, ChunkFrame):
            _out({"seq": frame.sequence, "i": json.loads(bytes(frame.chunk))["i"]})
            cursor = frame.sequence
            taken += 1
            if taken == stop_after:
                _out({"left_at": cursor})
                return
        elif isinstance(frame, CaughtUpFrame):
            _out({"caught_up": frame.head})
        elif isinstance(frame, EndFrame):
            _out({"end": frame.status})
        else:
            _out({"other": repr(frame)})


async def main(argv: list[str]) -> None:
    role, url, prefix, stream, *rest = argv
    log = RedisLog(url, prefix=prefix)
    try:
        if role == "write":
            await _write(log, stream, int(rest[0]), float(rest[1]))
        elif role == "read":
            await _read(log, stream, int(rest[0]), int(rest[1]))
        else:
            raise SystemExit(f"unknown role {role!r}")
    finally:
        await log.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
