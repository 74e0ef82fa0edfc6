"""What every test shares: the anyio backend, ``require()`` (skip outside CI, fail in CI), and the
test services: the shared Redis server's URL (``STREAMWIRE_TEST_REDIS``), Chromium and Node with
the pinned npm packages. ``./dev test`` asks :func:`missing_services` before pytest runs, so what
it announces is what the tests skip."""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

import pytest

#: In CI every test must run: a missing service is a failure, not a skip.
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}

ROOT = Path(__file__).resolve().parent.parent

#: The shared Redis server every Redis test uses (any database: each test has its own key prefix,
#: deletes only its own keys and never flushes). Tests that kill or restart Redis start a private
#: redis-server instead (``private_redis``, ``tests/log/redis_proc.py``).
REDIS_ENV = "STREAMWIRE_TEST_REDIS"
REDIS_URL = os.environ.get(REDIS_ENV) or "redis://127.0.0.1:6379/0"

#: How to get every test service on Debian or Ubuntu (``./dev test`` prints it).
INSTALL = "apt-get install redis-server chromium nodejs npm"

#: The test modules that run the pinned AI SDK under Node (``package-lock.json``).
NODE_TESTS = frozenset({"test_aisdk_node.py", "test_aisdk_tools_node.py"})


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def require(available: bool, why: str) -> None:
    """Skip (outside CI) or fail (in CI) when a service the test needs is missing."""
    if available:
        return
    if IN_CI:
        pytest.fail(f"{why} (CI never skips this test)")
    pytest.skip(why)


@functools.cache
def redis_problem() -> str | None:
    """Why the shared Redis at :data:`REDIS_URL` cannot be used (``None``: it answers PING)."""
    try:
        import redis
    except ImportError:
        return "redis-py is not installed (pip install -e '.[redis]')"
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1, socket_timeout=2)
    try:
        client.ping()
    except (redis.RedisError, OSError, ValueError) as exc:
        return (f"no Redis at {REDIS_URL} ({exc}): start redis-server (apt-get install "
                f"redis-server), or set {REDIS_ENV} to a Redis URL")
    finally:
        client.close()
    return None


def cluster_problem() -> str | None:
    """Why the Redis Cluster tests cannot start their own cluster (``None``: they can)."""
    missing = [tool for tool in ("redis-server", "redis-cli") if shutil.which(tool) is None]
    if missing:
        return (f"{' and '.join(missing)} not found: the cluster tests start a private 3-master "
                "cluster with them (apt-get install redis-server redis-tools)")
    return None


def redis_available() -> bool:
    return redis_problem() is None


def require_redis() -> None:
    """Skip (fail in CI) unless the shared Redis answers; the reason names :data:`REDIS_ENV`."""
    problem = redis_problem()
    require(problem is None, problem or "")


def purge_redis_keys(prefix: str) -> None:
    """Delete the shared Redis's keys under ``prefix`` (a test's own, never the others')."""
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        keys = list(client.scan_iter(f"{prefix}*"))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def node_problem() -> str | None:
    """Why the Node interop tests cannot run (``None``: node and the pinned packages are there)."""
    if shutil.which("node") is None:
        return "Node.js is not installed (apt-get install nodejs npm)"
    if not (ROOT / "node_modules" / "ai" / "package.json").exists():
        if shutil.which("npm") is None:
            return "npm is not installed, so `./dev test` cannot run `npm ci` (apt-get install npm)"
        return "the Node packages are not installed: `./dev test` runs `npm ci`"
    return None


def chromium_problem() -> str | None:
    if shutil.which("chromium") is None:
        return "Chromium is not installed (apt-get install chromium)"
    return None


def missing_services() -> list[tuple[str, str]]:
    """(which tests, why) for every test service missing here: ``./dev test`` prints these."""
    found = [("the Redis tests", redis_problem()),
             ("the Redis Cluster tests", cluster_problem()),
             ("the browser tests", chromium_problem()),
             ("the Node interop tests", node_problem())]
    return [(tests, why) for tests, why in found if why is not None]


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.path.name in NODE_TESTS:
        problem = node_problem()
        require(problem is None, problem or "")
