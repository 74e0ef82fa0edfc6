"""The command connection of ``RedisLog``: one auto-pipelined connection shared by every caller,
with a reply watchdog and no hidden retries (``NotSent`` says a command never left)."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from typing import Any, Final, final

from redis import exceptions as redis_errors
from redis.asyncio.connection import Connection, ConnectionPool

from ..._compat.redis import idle_socket_readable, new_connection, read_reply, stream_writer
from ...errors import LogError

__all__ = [
    "CLOSE_TIMEOUT",
    "REDIS_DOWN",
    "Commands",
    "NotSent",
    "match_prefix",
    "redacted_url",
]

#: Bytes written but not yet sent above which a caller waits for the socket (back-pressure).
_HIGH_WATER: Final = 1 << 20
#: Seconds ``aclose`` waits for the subscription task to finish.
CLOSE_TIMEOUT: Final = 2.0
REDIS_DOWN: Final = (redis_errors.ConnectionError, redis_errors.TimeoutError, OSError)


def redacted_url(url: str) -> str:
    """``url`` with its password shown as ``***`` (``redis://user:***@host:6379/0``)."""
    scheme, sep, rest = url.partition("://")
    auth, at, place = rest.rpartition("@")
    if not sep or not at:
        return url
    user, colon, _password = auth.partition(":")
    return f"{scheme}://{user}{colon}{'***' if colon else ''}@{place}"


def _pack(args: tuple[Any, ...]) -> bytes:
    """One command in RESP (an array of bulk strings); ints and strs as their text."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if type(arg) is bytes else str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


class NotSent(Exception):
    """The command never left this process (connecting failed), or the server refused it
    before running it (a cluster redirection): nothing was executed."""


def match_prefix(prefix: str) -> str:
    """A ``SCAN MATCH`` pattern for the keys that start with ``prefix``."""
    pattern = prefix.replace("\\", "\\\\")
    for special in "*?[]":
        pattern = pattern.replace(special, "\\" + special)
    return pattern + "*"


@final
class Commands:
    """One command connection shared by every caller, auto-pipelined.

    Each call writes its command at once and waits for its reply; a reader task matches replies
    to callers in order (Redis answers in order), so concurrent appends share syscalls instead of
    queueing for a connection. There are no hidden retries (redis-py's client retries after a
    connection error, which could run an append twice): a failure says whether the command left
    this process (``NotSent`` when it did not).
    """

    def __init__(self, url: str, timeout: float) -> None:
        self.timeout = timeout
        # RESP2: pub/sub messages arrive as replies (RESP3 would route them to push handlers)
        self.factory = ConnectionPool.from_url(  # pyright: ignore[reportUnknownMemberType]
            url, protocol=2, socket_timeout=timeout, socket_connect_timeout=timeout)
        #: The URL without its password (it is quoted in error messages).
        self.url = redacted_url(url)
        self._conn: Connection | None = None
        self._waiting: deque[asyncio.Future[Any]] = deque()
        self._deadlines: deque[float] = deque()
        self._watch: asyncio.TimerHandle | None = None
        self._out: list[bytes] = []
        self._sock: asyncio.StreamWriter | None = None
        self._reader: asyncio.Task[None] | None = None
        self._opening = asyncio.Lock()
        #: Set by ``aclose``: the log is closed (its users check it; ``call`` does not).
        self.closed = False
        #: One server, not a cluster (``_cluster.ClusterCommands`` is the cluster's).
        self.cluster = False

    async def _open(self) -> Connection:
        async with self._opening:
            conn = self._conn
            if conn is not None and conn.is_connected and (self._waiting or not idle_socket_readable(conn)):
                return conn
            # A connection killed while idle (CLIENT KILL, a restart) is readable (EOF) with no
            # reply pending: replace it before sending, so a dead socket is not mistaken for an
            # unknown outcome. asyncio may not have noticed the EOF yet, so ask the socket.
            await self._drop()
            conn = new_connection(self.factory)
            try:
                await conn.connect()  # type: ignore[no-untyped-call]
            except REDIS_DOWN as exc:
                await conn.disconnect(nowait=True)
                raise NotSent(str(exc)) from exc
            self._conn = conn
            # a fresh line of replies and of unsent bytes for each connection
            self._waiting = deque()
            self._deadlines = deque()
            self._out = []
            try:
                self._sock = stream_writer(conn)
            except LogError:
                await conn.disconnect(nowait=True)
                raise
            self._reader = asyncio.get_running_loop().create_task(self._read(conn))
            return conn

    async def call(self, *args: Any) -> Any:
        conn = self._conn
        if conn is None or not conn.is_connected or (not self._waiting and idle_socket_readable(conn)):
            conn = await self._open()
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[Any] = loop.create_future()
        self._waiting.append(reply)
        deadline = loop.time() + self.timeout
        self._deadlines.append(deadline)
        if self._watch is None:
            self._watch = loop.call_at(deadline, self._check, conn)
        # Commands issued in one event-loop turn go out in one write (auto-pipelining), straight
        # to the stream: redis-py's send wraps every write in wait_for (a task per command). A
        # lost connection shows up in the reader, which fails the reply.
        writer = self._sock
        assert writer is not None  # set with the connection
        if len(self._waiting) == 1:
            writer.write(_pack(args))  # the line was idle: no one to batch with, send now
        else:
            out = self._out
            out.append(_pack(args))
            if len(out) == 1:
                loop.call_soon(self._flush, conn)
        try:
            if writer.transport.get_write_buffer_size() > _HIGH_WATER:
                await writer.drain()
            return await reply
        finally:
            reply.cancel()  # no-op once answered; else its slot stays in line, the reader skips it

    def call_at(self, key: str | bytes, *args: Any) -> Any:
        """``call`` (the cluster's ``call_at`` routes by ``key``; one server has it all)."""
        return self.call(*args)

    async def node_for(self, key: str | bytes) -> tuple[str, ConnectionPool]:
        """The server that holds ``key``: its name and connection settings."""
        return "", self.factory

    def stale(self) -> None:
        """A cluster's routing may be out of date (one server: nothing to do)."""

    async def scan(self, match: str) -> AsyncIterator[bytes]:
        """The keys that match ``match`` (``SCAN``, never ``KEYS``: the server is not blocked)."""
        cursor: Any = b"0"
        while True:
            cursor, keys = await self.call("SCAN", cursor, "MATCH", match, "COUNT", 1000)
            for key in keys:
                yield key
            if cursor in (b"0", 0):
                return

    def _check(self, conn: Connection) -> None:
        """The watchdog (one timer per connection, not one per command): replies come in order,
        so when the oldest is overdue Redis is hung or unreachable; fail every waiting command
        and drop the connection."""
        self._watch = None
        waiting, deadlines = self._waiting, self._deadlines
        if conn is not self._conn or not waiting:
            return
        loop = asyncio.get_running_loop()
        if deadlines[0] > loop.time():
            self._watch = loop.call_at(deadlines[0], self._check, conn)
            return
        error = redis_errors.TimeoutError(
            f"no reply within command_timeout={self.timeout}s (raise command_timeout= on the "
            "log if Redis is just slow)")
        self._conn = None
        self._fail_waiting(waiting, deadlines, error)
        if self._sock is not None:
            self._sock.transport.abort()

    @staticmethod
    def _fail_waiting(waiting: deque[asyncio.Future[Any]], deadlines: deque[float],
                      error: BaseException) -> None:
        """Every reply still awaited on one connection's line gets ``error`` (the deques are the
        ones of that connection: a new connection has its own by the time an old reader ends)."""
        while waiting:
            reply = waiting.popleft()
            deadlines.popleft()
            if not reply.done():
                reply.set_exception(error)

    def _flush(self, conn: Connection) -> None:
        out, self._out = self._out, []
        if conn is self._conn and out and self._sock is not None:
            self._sock.write(b"".join(out))

    async def _read(self, conn: Connection) -> None:
        waiting, deadlines = self._waiting, self._deadlines
        try:
            while True:
                try:
                    answer = await read_reply(conn)
                except redis_errors.ResponseError as exc:
                    answer = exc
                if not waiting:
                    raise redis_errors.ConnectionError(f"unexpected reply from Redis: {answer!r}")
                reply = waiting.popleft()
                deadlines.popleft()
                if reply.done():
                    continue
                if isinstance(answer, redis_errors.ResponseError):
                    reply.set_exception(answer)
                else:
                    reply.set_result(answer)
        except (Exception, asyncio.CancelledError) as exc:
            error = exc if isinstance(exc, REDIS_DOWN) else redis_errors.ConnectionError(
                f"the command connection closed ({exc!r})")
            if self._conn is conn:
                self._conn = None
            self._fail_waiting(waiting, deadlines, error)
            await conn.disconnect(nowait=True)
            if isinstance(exc, asyncio.CancelledError):
                raise

    async def _drop(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None and not reader.done():
            reader.cancel()
            await asyncio.wait({reader}, timeout=CLOSE_TIMEOUT)
        if self._conn is not None:
            await self._conn.disconnect(nowait=True)
            self._conn = None

    async def purge(self, prefix: str) -> int:
        """Delete every key that starts with ``prefix`` (``SCAN``, never ``KEYS``)."""
        return await purge(self, prefix)

    async def aclose(self) -> None:
        self.closed = True
        await self._drop()


async def purge(commands: Any, prefix: str) -> int:
    """Delete every key of ``commands`` (a ``Commands`` or a cluster's) under ``prefix``, one
    ``UNLINK`` per key (a cluster's keys live in many slots), a page of them pipelined."""
    deleted = 0
    batch: list[bytes] = []

    async def unlink() -> int:
        done = await asyncio.gather(*[commands.call_at(k, "UNLINK", k) for k in batch])
        batch.clear()
        return sum(int(n) for n in done)

    try:
        async for key in commands.scan(match_prefix(prefix)):
            batch.append(key)
            if len(batch) >= 1000:
                deleted += await unlink()
        return deleted + await unlink()
    except (NotSent, *REDIS_DOWN) as exc:
        raise LogError(f"purge of {prefix!r} failed: {exc}", retryable=True) from exc
