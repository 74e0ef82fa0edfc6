"""The one place ``RedisLog`` reaches past redis-py's public API: the asyncio stream writer of a
connected redis-py ``Connection`` (its private ``_writer``), behind a checked adapter.

Why it is needed: the command connection writes each command straight into the socket's buffer
and sends one event-loop turn's commands in one write (auto-pipelining). redis-py's public send
(``send_packed_command``) wraps every write in ``asyncio.wait_for`` when a socket timeout is set (a
task per command) and awaits a drain per call. And before sending on an idle connection, the log
must tell a connection the server closed meanwhile (nothing sent yet: safe to reconnect) from a
reply that is merely late (unknown outcome); only the socket knows before asyncio has processed the
end of file, so ``idle_socket_readable`` asks it with ``select``.

Checked: ``writer_of`` raises ``LogError`` naming the redis-py version when the attribute is missing
or is not an ``asyncio.StreamWriter``, and ``tests/log/test_redis.py`` fails loudly when a redis-py
outside ``TESTED_REDIS_PY_MAJORS`` is installed, or when the adapter no longer fits a real
connection.
"""

from __future__ import annotations

import asyncio
import select

import redis
from redis.asyncio.connection import Connection

from ..errors import LogError

__all__ = ["TESTED_REDIS_PY_MAJORS", "idle_socket_readable", "writer_of"]

#: The redis-py major versions this adapter was checked against.
TESTED_REDIS_PY_MAJORS = range(5, 9)


def writer_of(conn: Connection) -> asyncio.StreamWriter:
    """The connected ``conn``'s asyncio stream writer."""
    writer = getattr(conn, "_writer", None)
    if not isinstance(writer, asyncio.StreamWriter):
        raise LogError(
            f"redis-py {redis.__version__} no longer keeps a connection's asyncio.StreamWriter in "
            "Connection._writer, which streamwire's RedisLog writes to (checked with redis-py "
            f"{TESTED_REDIS_PY_MAJORS.start} to {TESTED_REDIS_PY_MAJORS.stop - 1}): install one of "
            "those, or a streamwire release that supports this redis-py")
    return writer


def idle_socket_readable(conn: Connection) -> bool:
    """Whether an idle connection has anything to read (it should not: EOF or garbage). True
    when the socket cannot be asked (treat the connection as unusable)."""
    writer = getattr(conn, "_writer", None)
    if not isinstance(writer, asyncio.StreamWriter):
        return True
    sock = writer.transport.get_extra_info("socket")
    if sock is None:
        return True
    try:
        ready, _, _ = select.select([sock.fileno()], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(ready)
