"""The command line of a ``RedisLog`` on a Redis Cluster: one ``Commands`` (auto-pipelined
connection) per master, each command routed by its key's hash slot, the slot map read with
``CLUSTER SLOTS`` and read again when a node says ``MOVED`` or cannot be reached.

Redirections are followed only when they prove the command was not run: ``MOVED`` (the node does
not serve the slot) is retried on the new owner, at most ``MAX_REDIRECTS`` times; ``ASK`` and
``TRYAGAIN`` (the slot is being migrated) and ``CLUSTERDOWN`` raise ``NotSent`` (nothing changed:
the caller's error is retryable). A command whose connection broke after it was sent is never
retried: its outcome is unknown, as on one server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Final, final

from redis import exceptions as redis_errors
from redis.asyncio.connection import ConnectionPool

from ..._compat.redis import key_slot
from ...errors import UsageError
from ._commands import REDIS_DOWN, Commands, NotSent, purge, redacted_url

__all__ = ["CLUSTER_SCHEME", "MAX_REDIRECTS", "ClusterCommands", "parse_cluster_url"]

#: The URL scheme of a cluster: ``redis-cluster://[user:password@]HOST:PORT[,HOST:PORT...]``.
CLUSTER_SCHEME: Final = "redis-cluster://"
#: ``MOVED`` replies followed for one command before it fails (retryable: it never ran).
MAX_REDIRECTS: Final = 5
_SLOTS: Final = 16384


def parse_cluster_url(url: str) -> tuple[str, list[tuple[str, int]]]:
    """``(userinfo@ or '', [(host, port), ...])`` of a ``redis-cluster://`` URL (the seed nodes;
    the others are found with ``CLUSTER SLOTS``). ``UsageError`` says what is wrong."""
    example = f"{CLUSTER_SCHEME}10.0.0.1:7000,10.0.0.2:7000"
    if not url.startswith(CLUSTER_SCHEME):
        raise UsageError(f"a cluster URL starts with {CLUSTER_SCHEME}, e.g. {example}: {url!r}")
    rest = url.removeprefix(CLUSTER_SCHEME)
    auth, at, hosts = rest.rpartition("@")
    auth = auth + at
    hosts, _, db = hosts.partition("/")
    if db not in ("", "0"):
        raise UsageError(f"a Redis Cluster has only database 0, not {db!r}: {url!r}")
    seeds: list[tuple[str, int]] = []
    for item in hosts.split(","):
        host, colon, port = item.strip().rpartition(":")
        host = host.removeprefix("[").removesuffix("]")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(f"each node of a cluster URL is HOST:PORT, not {item!r} "
                             f"(e.g. {example})")
        seeds.append((host, int(port)))
    return auth, seeds


@final
class ClusterCommands:
    """The cluster's ``Commands``: ``call_at(key, ...)`` runs a command on the master that serves
    ``key``'s slot (every command of a stream names one of its keys, all in one slot)."""

    def __init__(self, url: str, timeout: float) -> None:
        self.timeout = timeout
        self._auth, self._seeds = parse_cluster_url(url)
        #: The URL without its password (it is quoted in error messages).
        self.url = redacted_url(url)
        self._nodes: dict[str, Commands] = {}
        self._slots: list[str] = []
        self._refresh = asyncio.Lock()
        self._stale = True
        self.closed = False
        #: A cluster (keys of one stream share a slot; the indexes are written apart).
        self.cluster = True

    def _node(self, name: str) -> Commands:
        node = self._nodes.get(name)
        if node is None:
            host, _, port = name.rpartition(":")
            host = f"[{host}]" if ":" in host else host
            # the URL's user and password (still URL-quoted) go to every node
            node = self._nodes[name] = Commands(f"redis://{self._auth}{host}:{port}/0",
                                                self.timeout)
        return node

    def stale(self) -> None:
        """Read the slot map again before the next command (a node moved or went away)."""
        self._stale = True

    async def _routes(self) -> list[str]:
        if not self._stale and self._slots:
            return self._slots
        async with self._refresh:
            if self._stale or not self._slots:
                self._slots = await self._read_slots()
                self._stale = False
        return self._slots

    async def _read_slots(self) -> list[str]:
        """The slot map (slot -> ``host:port`` of its master) from the first node that answers:
        the known masters first, then the seeds."""
        names = list(self._nodes) + [f"{h}:{p}" for h, p in self._seeds]
        problems: list[str] = []
        for name in dict.fromkeys(names):
            try:
                reply = await self._node(name).call("CLUSTER", "SLOTS")
            except (NotSent, redis_errors.RedisError, *REDIS_DOWN) as exc:
                problems.append(f"{name}: {exc}")
                continue
            slots = [""] * _SLOTS
            for start, end, master, *_replicas in reply:
                host = master[0].decode() if isinstance(master[0], bytes) else str(master[0])
                owner = f"{host or name.rpartition(':')[0]}:{int(master[1])}"
                slots[int(start):int(end) + 1] = [owner] * (int(end) - int(start) + 1)
            if "" in slots:
                problems.append(f"{name}: not every slot is served (CLUSTER SLOTS)")
                continue
            return slots
        raise NotSent(f"no node of the Redis Cluster {self.url} gave its slot map "
                      f"({'; '.join(problems)})")

    async def node_for(self, key: str | bytes) -> tuple[str, ConnectionPool]:
        """The master that serves ``key``'s slot: its ``host:port`` and connection settings."""
        name = (await self._routes())[key_slot(key)]
        return name, self._node(name).factory

    async def call_at(self, key: str | bytes, *args: Any) -> Any:
        """Run one command on the master of ``key``'s slot (``MOVED``: on the new one)."""
        slot = key_slot(key)
        for _ in range(MAX_REDIRECTS + 1):
            node = self._node((await self._routes())[slot])
            try:
                return await node.call(*args)
            except redis_errors.MovedError:
                self._stale = True  # not run there: ask again who serves it
            except (redis_errors.AskError, redis_errors.TryAgainError) as exc:
                raise NotSent(f"the slot of {key!r} is being migrated ({exc}); retry") from exc
            except redis_errors.ClusterDownError as exc:
                self._stale = True
                raise NotSent(f"the Redis Cluster is down ({exc}); retry") from exc
            except NotSent:
                self._stale = True  # the node is unreachable: maybe a replica took over
                raise
        raise NotSent(f"the Redis Cluster moved the slot of {key!r} {MAX_REDIRECTS} times in a "
                      "row; retry")

    async def scan(self, match: str) -> AsyncIterator[bytes]:
        """The keys that match ``match`` on every master."""
        for name in dict.fromkeys(await self._routes()):
            async for key in self._node(name).scan(match):
                yield key

    async def purge(self, prefix: str) -> int:
        """Delete every key that starts with ``prefix`` on every master."""
        return await purge(self, prefix)

    async def aclose(self) -> None:
        self.closed = True
        await asyncio.gather(*[node.aclose() for node in self._nodes.values()])
