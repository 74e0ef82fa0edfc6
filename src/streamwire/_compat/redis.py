"""redis-py below its client API, in one place, checked against the installed version.

``streamwire.log.redis`` drives redis-py connections itself instead of through a client: one
auto-pipelined command connection shared by every caller (replies matched in order, a watchdog
instead of a timeout task per command) and one pub/sub connection whose reconnects it decides.
Neither redis-py's client nor its ``PubSub`` can: the client takes a pooled connection per
command and retries after a connection error (which could run an append twice), and ``PubSub``
reconnects silently (losing the messages published meanwhile). What it uses:

* ``new_connection(pool)``: ``ConnectionPool.make_connection`` (internal), a connection with the
  URL's settings that the log owns (outside the pool's accounting);
* ``stream_writer(conn)``: the connection's asyncio stream writer (private ``Connection._writer``).
  The command connection writes each command straight into the socket's buffer and sends one
  event-loop turn's commands in one write; redis-py's send (``send_packed_command``) wraps every
  write in ``asyncio.wait_for`` when a socket timeout is set (a task per command) and awaits a
  drain per call;
* ``idle_socket_readable(conn)``: whether an idle connection's socket has bytes (EOF) before asyncio
  noticed, so that a connection the server closed meanwhile (nothing sent yet: safe to reconnect)
  is told from a reply that is merely late (unknown outcome);
* ``read_reply(conn)``: ``Connection.read_response`` with no timeout (the log's watchdog times out);
* ``send_command(conn, *args)``: ``Connection.pack_command`` and ``send_packed_command`` without
  redis-py's health check (the pub/sub connection's control commands: ``SUBSCRIBE``, ``PING``);
* ``key_slot(key)``: a key's Redis Cluster hash slot (``redis.crc.key_slot``, the CRC16 of its
  hash tag modulo 16,384), so the cluster mode routes a command without a round trip.

Checked: importing this module raises ``ImportError`` naming the installed redis-py when its major
version is not in ``TESTED_REDIS_PY_MAJORS`` or when a method above (or the ``_writer`` slot, or a
keyword used) is missing; ``stream_writer`` raises ``LogError`` when a live connection does not hold
an ``asyncio.StreamWriter`` there. ``tests/log/test_redis.py`` checks the adapter on a real
connection. Public redis-py was measured for the hot path and is slower (see above): no fallback.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import select
from collections.abc import Awaitable
from typing import Any, Final, cast

try:
    import redis
    import redis.crc
    from redis.asyncio.connection import Connection, ConnectionPool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'streamwire.log.redis needs the redis package: pip install "streamwire[redis]"') from exc

from ..errors import LogError

__all__ = [
    "TESTED_REDIS_PY_MAJORS",
    "idle_socket_readable",
    "key_slot",
    "new_connection",
    "read_reply",
    "send_command",
    "stream_writer",
    "writer_of",
]

#: The redis-py major versions this module was checked against.
TESTED_REDIS_PY_MAJORS: Final = range(5, 9)
_SUPPORTED: Final = f"{TESTED_REDIS_PY_MAJORS.start} to {TESTED_REDIS_PY_MAJORS.stop - 1}"


def _misfits() -> list[str]:
    """What the installed redis-py lacks of what this module uses (empty: it fits)."""
    missing: list[str] = []
    try:
        major = int(redis.__version__.split(".")[0])
    except (AttributeError, ValueError):
        major = -1
    if major not in TESTED_REDIS_PY_MAJORS:
        missing.append(f"a major version from {_SUPPORTED}")
    wanted = ((ConnectionPool, "make_connection", ()), (Connection, "read_response", ("timeout",)),
              (Connection, "send_packed_command", ("check_health",)),
              (Connection, "pack_command", ()))
    for owner, name, keywords in wanted:
        method = getattr(owner, name, None)
        if not callable(method):
            missing.append(f"{owner.__name__}.{name}")
            continue
        try:
            params = inspect.signature(method).parameters
        except (TypeError, ValueError):
            continue
        missing += [f"{owner.__name__}.{name}({k}=)" for k in keywords if k not in params]
    if not callable(getattr(redis.crc, "key_slot", None)):
        missing.append("redis.crc.key_slot")
    slots = [s for c in Connection.__mro__ for s in c.__dict__.get("__slots__", ())]
    if slots and "_writer" not in slots:  # no slots at all: stream_writer checks a live one
        missing.append("Connection._writer")
    return missing


_MISFITS: Final = _misfits()
if _MISFITS:
    raise ImportError(
        f"streamwire.log.redis does not fit redis-py {redis.__version__} (it lacks: "
        f"{', '.join(_MISFITS)}); streamwire was checked with redis-py {_SUPPORTED}: "
        f'install one of those (pip install "redis>={TESTED_REDIS_PY_MAJORS.start},'
        f'<{TESTED_REDIS_PY_MAJORS.stop}"), or a streamwire release that supports this redis-py')


def new_connection(pool: ConnectionPool) -> Connection:
    """A new, unconnected connection with ``pool``'s settings, owned by the caller."""
    return cast(Connection, pool.make_connection())  # type: ignore[no-untyped-call]


def stream_writer(conn: Connection) -> asyncio.StreamWriter:
    """The connected ``conn``'s asyncio stream writer."""
    writer = getattr(conn, "_writer", None)
    if not isinstance(writer, asyncio.StreamWriter):
        raise LogError(
            f"redis-py {redis.__version__} no longer keeps a connection's asyncio.StreamWriter in "
            "Connection._writer, which streamwire's RedisLog writes to (checked with redis-py "
            f"{_SUPPORTED}): install one of those, or a streamwire release that supports this "
            "redis-py")
    return writer


#: The name the adapter had before ``_compat`` (kept for the adapter test).
writer_of: Final = stream_writer


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


def read_reply(conn: Connection) -> Awaitable[Any]:
    """The next reply on ``conn`` (no timeout: the caller's watchdog has one). A plain function
    returning redis-py's awaitable: no extra coroutine per reply on the hot path."""
    return cast(Awaitable[Any], conn.read_response(timeout=math.inf))


async def send_command(conn: Connection, *args: str | bytes) -> None:
    """Send one command on ``conn`` without redis-py's health check (which could PING, and
    reconnect, a pub/sub connection behind the caller's back)."""
    await conn.send_packed_command(conn.pack_command(*args), check_health=False)


def key_slot(key: str | bytes) -> int:
    """The Redis Cluster hash slot of ``key`` (0 to 16,383)."""
    return int(redis.crc.key_slot(key.encode() if isinstance(key, str) else key))
