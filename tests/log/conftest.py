"""The ``make_log`` fixture: the contract suite runs once per backend (memory, SQLite, Redis, and
Redis Cluster on a private local 3-master cluster these tests start: ``redis_cluster_url``), and
the memory and SQLite backends once more on trio (memory's readers wait on asyncio futures on
asyncio and on an ``anyio.Event`` elsewhere; SQLite runs its SQL through anyio's worker threads
off asyncio instead of its own thread)."""

from __future__ import annotations

import importlib.util
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import REDIS_URL, require, require_redis
from log.redis_proc import cluster_problem, redis_cluster
from streamwire.log import StreamLog
from streamwire.testing import LogFactory


def _new_log(backend: str, tmp_path: Path, n: int, limits: dict[str, Any],
             cluster_url: str = "") -> StreamLog:
    if backend in ("memory", "memory-trio"):
        from streamwire.log.memory import MemoryLog

        return MemoryLog(**limits)
    if backend in ("sqlite", "sqlite-trio"):
        from streamwire.log.sqlite import SQLiteLog

        return SQLiteLog(tmp_path / f"log{n}.db", **limits)
    from streamwire.log.redis import RedisLog

    url = cluster_url if backend == "redis-cluster" else REDIS_URL
    log: StreamLog = RedisLog(url=url, prefix=f"swtest:{uuid.uuid4().hex}:", **limits)
    return log


@pytest.fixture(scope="session")
def redis_cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A private local Redis Cluster (3 masters on free ports) for this session: its URL."""
    problem = cluster_problem()
    require(problem is None, problem or "")
    with redis_cluster(tmp_path_factory.mktemp("redis-cluster")) as cluster:
        yield cluster.url


@pytest.fixture(params=["memory", "memory-trio", "sqlite", "sqlite-trio",
                        pytest.param("redis", marks=pytest.mark.redis),
                        pytest.param("redis-cluster", marks=pytest.mark.redis)])
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    if name == "redis":
        require(importlib.util.find_spec("streamwire.log.redis") is not None,
                "streamwire.log.redis is not written yet")
        require_redis()
    if name == "redis-cluster":
        request.getfixturevalue("redis_cluster_url")
    return name


@pytest.fixture
def anyio_backend(request: pytest.FixtureRequest) -> str:
    if "backend" in request.fixturenames and request.getfixturevalue("backend").endswith("-trio"):
        return "trio"
    return "asyncio"


@pytest.fixture
async def make_log(backend: str, tmp_path: Path, anyio_backend: str,
                   request: pytest.FixtureRequest) -> AsyncIterator[LogFactory]:
    """Fresh logs of the parametrised backend; every one is closed after the test."""
    logs: list[StreamLog] = []
    cluster_url = (request.getfixturevalue("redis_cluster_url") if backend == "redis-cluster"
                   else "")

    async def make(**limits: Any) -> StreamLog:
        log = _new_log(backend, tmp_path, len(logs), limits, cluster_url)
        logs.append(log)
        return log

    yield make
    for log in logs:
        purge = getattr(log, "purge", None)  # RedisLog: leave no keys in the shared server
        if purge is not None:
            await purge()
        await log.aclose()
