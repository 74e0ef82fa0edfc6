"""The ``make_log`` fixture: the contract suite runs once per backend (memory, SQLite, Redis), and
the memory and SQLite backends once more on trio (memory's readers wait on asyncio futures on
asyncio and on an ``anyio.Event`` elsewhere; SQLite runs its SQL through anyio's worker threads
off asyncio instead of its own thread)."""

from __future__ import annotations

import importlib.util
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from conftest import REDIS_URL, require, require_redis
from streamwire.log import StreamLog
from streamwire.testing import LogFactory


def _new_log(backend: str, tmp_path: Path, n: int, limits: dict[str, Any]) -> StreamLog:
    if backend in ("memory", "memory-trio"):
        from streamwire.log.memory import MemoryLog

        return MemoryLog(**limits)
    if backend in ("sqlite", "sqlite-trio"):
        from streamwire.log.sqlite import SQLiteLog

        return SQLiteLog(tmp_path / f"log{n}.db", **limits)
    from streamwire.log.redis import RedisLog

    log: StreamLog = RedisLog(url=REDIS_URL, prefix=f"swtest:{uuid.uuid4().hex}:", **limits)
    return log


@pytest.fixture(params=["memory", "memory-trio", "sqlite", "sqlite-trio",
                        pytest.param("redis", marks=pytest.mark.redis)])
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    if name == "redis":
        require(importlib.util.find_spec("streamwire.log.redis") is not None,
                "streamwire.log.redis is not written yet")
        require_redis()
    return name


@pytest.fixture
def anyio_backend(request: pytest.FixtureRequest) -> str:
    if "backend" in request.fixturenames and request.getfixturevalue("backend").endswith("-trio"):
        return "trio"
    return "asyncio"


@pytest.fixture
async def make_log(backend: str, tmp_path: Path, anyio_backend: str) -> AsyncIterator[LogFactory]:
    """Fresh logs of the parametrised backend; every one is closed after the test."""
    logs: list[StreamLog] = []

    async def make(**limits: Any) -> StreamLog:
        log = _new_log(backend, tmp_path, len(logs), limits)
        logs.append(log)
        return log

    yield make
    for log in logs:
        purge = getattr(log, "purge", None)  # RedisLog: leave no keys in the shared server
        if purge is not None:
            await purge()
        await log.aclose()
