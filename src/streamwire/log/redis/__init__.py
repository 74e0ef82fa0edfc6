"""The Redis backend: ``RedisLog`` (streams shared by every server process that points at the
same Redis) and its record store, on the log's one connection set-up (``_commands.Commands``).

Only this package and ``streamwire._compat.redis`` import redis-py."""

from __future__ import annotations

# First: a missing or unfit redis-py gets one clear ImportError (naming the extra or the version).
from ..._compat import redis as _redis_py  # noqa: F401  # pyright: ignore[reportUnusedImport]
from ._log import (
    DEFAULT_COMMAND_TIMEOUT,
    DEFAULT_HEALTH_INTERVAL,
    DEFAULT_MAX_READER_QUEUE,
    DEFAULT_PREFIX,
    DEFAULT_SUBSCRIBE_TIMEOUT,
    RedisLog,
)

__all__ = [
    "DEFAULT_COMMAND_TIMEOUT",
    "DEFAULT_HEALTH_INTERVAL",
    "DEFAULT_MAX_READER_QUEUE",
    "DEFAULT_PREFIX",
    "DEFAULT_SUBSCRIBE_TIMEOUT",
    "RedisLog",
]
