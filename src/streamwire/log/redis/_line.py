"""``Line``: what ``RedisLog`` and its record store need of their command connection, one server's
(``_commands.Commands``) or a cluster's (``_cluster.ClusterCommands``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

from redis.asyncio.connection import ConnectionPool

__all__ = ["Line"]


class Line(Protocol):
    """Commands routed by key: every command names the key whose server runs it."""

    url: str
    closed: bool
    #: True on a cluster: a stream's scripts may touch its own slot only.
    cluster: bool

    def call_at(self, key: str | bytes, *args: Any) -> Any:
        """Run one command on the server that holds ``key``; its reply (awaitable)."""
        ...

    async def node_for(self, key: str | bytes) -> tuple[str, ConnectionPool]:
        """The name and connection settings of the server that holds ``key``."""
        ...

    def stale(self) -> None:
        """The routing may be out of date: read it again before the next command."""
        ...

    def scan(self, match: str) -> AsyncIterator[bytes]:
        """Every key that matches ``match`` (``SCAN`` on every server)."""
        ...

    async def purge(self, prefix: str) -> int:
        """Delete every key under ``prefix``; how many."""
        ...

    async def aclose(self) -> None:
        """Close the connections."""
        ...
