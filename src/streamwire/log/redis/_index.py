"""The stream index of ``RedisLog`` (what ``list_streams`` pages through) where it is not kept by
the stream's own scripts: its key names, its updates on a Redis Cluster (apart from the stream's
script: best-effort) and the migration that indexes streams written before the index existed.

On one server the index is ``{prefix}:s:ids`` (sorted set of ids) and ``{prefix}:s:exp`` (the
finished ones by when they expire), changed by the stream's scripts atomically with the stream.
On a cluster they are ``{prefix}:s:{{prefix}:s}:ids`` and ``...:exp`` (one slot of their own,
named by the hash tag): a script may touch one slot only, so the stream's script changes the
stream, then ``REINDEX`` the index, in a second command. A crash (or a lost connection) between
the two leaves the index behind: a stream that is not listed (``migrate_index`` lists it again)
or a listed one that is gone (``list_streams`` skips it and unlists it)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Final

from ...errors import LogError
from ._commands import REDIS_DOWN, NotSent, match_prefix
from ._line import Line
from ._scripts import run_index

__all__ = ["index_keys", "migrate_index", "reindex_after"]

#: The index change each stream script makes (on a cluster: made after it by ``REINDEX``), from
#: its reply and arguments: (op, ttl ms) or None.
_Change = Callable[[Any, tuple[Any, ...]], "tuple[str, int] | None"]
_CHANGES: Final[dict[str, _Change]] = {
    "create": lambda reply, args: ("list", 0) if int(reply) == 1 else None,
    "restart": lambda reply, args: ("list", 0),
    "delete": lambda reply, args: ("unlist", 0),
    "unlist": lambda reply, args: ("unlist", 0) if int(reply) == 1 else None,
    # finish: (status, payload, ttl, ...); lapse: (ttl, payload)
    "finish": lambda reply, args: ("expire", int(args[2])) if int(args[2]) > 0 else None,
    "lapse": lambda reply, args: (
        ("expire", int(args[0])) if int(reply) == 1 and int(args[0]) > 0 else None),
}


def index_keys(prefix: str, cluster: bool) -> tuple[str, str]:
    """The index and its expiry set (unchanged on one server; one hash slot on a cluster)."""
    base = f"{prefix}:s:"
    if cluster:
        base += f"{{{prefix}:s}}:"
    return f"{base}ids", f"{base}exp"


async def reindex_after(commands: Line, index: tuple[str, str], name: str, stream_id: str,
                        reply: Any, args: tuple[Any, ...]) -> None:
    """On a cluster, the index change script ``name`` made to the stream (best-effort: the
    stream changed already, so a failure here is not the caller's; the index catches up)."""
    change = _CHANGES.get(name)
    if not commands.cluster or change is None:
        return
    op = change(reply, args)
    if op is None:
        return
    # a failure is not the caller's (see the module's doc: list_streams and migrate_index
    # tolerate a missing or stale entry)
    with contextlib.suppress(LogError):
        await run_index(commands, index, op[0], stream_id, op[1])


async def migrate_index(commands: Line, prefix: str, index: tuple[str, str]) -> int:
    """List every stream under ``prefix`` that the index misses (with its expiry, when it has
    one); how many were missing. Idempotent: a second run finds none."""
    head, tail = f"{prefix}:s:{{", "}:meta"
    added = 0
    try:
        async for raw in commands.scan(match_prefix(head)):
            key = raw.decode()
            if not key.endswith(tail):
                continue
            stream_id = key[len(head):-len(tail)]
            ttl = int(await commands.call_at(key, "PTTL", key))
            if ttl == -2:
                continue  # gone since the scan saw it
            added += int(await run_index(commands, index, "migrate", stream_id, max(ttl, 0)))
    except (NotSent, *REDIS_DOWN) as exc:
        raise LogError(f"migrating the stream index of {prefix!r} failed: {exc}; retry (it is "
                       "idempotent)", retryable=True) from exc
    return added
