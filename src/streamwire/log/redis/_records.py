"""``RedisRecordStore``: versioned records on the stream log's Redis server, under its prefix, sent
on the log's own command connection (auto-pipelined: a burst of callers queues on one socket,
none is refused). For records of kind ``k``: ``{prefix}:k:{<id>}`` is a hash of version, status,
updated (time of the last change) and body; the set ``{prefix}:ks:running`` holds the ids of the
running ones, the sorted set ``{prefix}:ks:paused`` the paused ones and ``{prefix}:ks:settled``
the others, both by time of last change (for ``"run"``: ``run:{<id>}``, ``runs:running``,
``runs:settled``, ``runs:paused``). Insert and compare-and-set are Lua scripts: the record and its
index change together or not at all.

On a Redis Cluster a record (``{prefix}:run:{<id>}``: the slot of the run's stream) and the index
(``{prefix}:runs:{{prefix}:runs}:running`` etc., one slot of their own, with a hash ``...:ver`` of
each indexed record's version) are in different slots: the record changes atomically as above,
then the index in a second command, best-effort. That one applies only a version newer than the
one it indexed, so index updates that arrive out of order never undo a newer one; a crash between
the two leaves the index behind (the next change of the record repairs it), and ``expire`` deletes
a record only if the record itself is still settled (or paused) and old enough."""

from __future__ import annotations

import contextlib
from typing import Any, Final, final

from redis import exceptions as redis_errors

from ...errors import LogError
from .._records import PAUSED, RUNNING, StoredRecord
from ._commands import REDIS_DOWN, NotSent
from ._line import Line
from ._scripts import Script, evalsha

__all__ = ["RedisRecordStore"]

# Index the record ARGV[1] of status ARGV[3] changed at ARGV[5]: in the running set (KEYS[2]),
# the settled zset (KEYS[3]) or the paused zset (KEYS[4]), and out of the other two.
_INDEX: Final = f"""
local function index()
  local s = ARGV[3]
  if s == '{RUNNING}' then redis.call('SADD', KEYS[2], ARGV[1])
  else redis.call('SREM', KEYS[2], ARGV[1]) end
  if s ~= '{RUNNING}' and s ~= '{PAUSED}' then redis.call('ZADD', KEYS[3], ARGV[5], ARGV[1])
  else redis.call('ZREM', KEYS[3], ARGV[1]) end
  if s == '{PAUSED}' then redis.call('ZADD', KEYS[4], ARGV[5], ARGV[1])
  else redis.call('ZREM', KEYS[4], ARGV[1]) end
end
"""
# KEYS: record, running set, settled zset, paused zset; ARGV: id, version, status, body,
# updated_at. Returns the stored record's fields (version, status, updated, body) or nil.
_INSERT: Final = Script(_INDEX + """
local found = redis.call('HMGET', KEYS[1], 'version', 'status', 'updated', 'body')
if found[4] then return found end
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'status', ARGV[3], 'body', ARGV[4],
           'updated', ARGV[5])
index()
return false
""")
# KEYS: record, running set, settled zset, paused zset; ARGV: id, new version, status, body,
# updated_at. Returns 1 when swapped.
_SWAP: Final = Script(_INDEX + """
local v = redis.call('HGET', KEYS[1], 'version')
if not v or tonumber(v) ~= tonumber(ARGV[2]) - 1 then return 0 end
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'status', ARGV[3], 'body', ARGV[4],
           'updated', ARGV[5])
index()
return 1
""")
# KEYS: a zset (settled or paused); ARGV: before, record key prefix. Deletes up to 1,000 records
# indexed there before; their count.
_EXPIRE: Final = Script("""
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'LIMIT', 0, 1000)
for _, id in ipairs(ids) do
  redis.call('DEL', ARGV[2] .. '{' .. id .. '}')
  redis.call('ZREM', KEYS[1], id)
end
return #ids
""")

# Cluster. KEYS: the record; ARGV as _INSERT's. The record alone (its index is in another slot).
_INSERT_ONE: Final = Script("""
local found = redis.call('HMGET', KEYS[1], 'version', 'status', 'updated', 'body')
if found[4] then return found end
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'status', ARGV[3], 'body', ARGV[4],
           'updated', ARGV[5])
return false
""")
# Cluster. KEYS: the record; ARGV as _SWAP's.
_SWAP_ONE: Final = Script("""
local v = redis.call('HGET', KEYS[1], 'version')
if not v or tonumber(v) ~= tonumber(ARGV[2]) - 1 then return 0 end
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'status', ARGV[3], 'body', ARGV[4],
           'updated', ARGV[5])
return 1
""")
# Cluster. KEYS: the versions hash, running set, settled zset, paused zset (one slot); ARGV: id,
# version, status, '' (no body), updated_at. Indexes the record unless a newer version was.
_REINDEX: Final = Script(_INDEX + """
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v and tonumber(v) >= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
index()
return 1
""")
# Cluster. KEYS: the record; ARGV: before, 'paused' or 'settled'. Deletes the record if it is
# still what the index said (paused, or neither running nor paused) and last changed before:
# 1 deleted, 0 kept (it changed since: its own reindex moves it), -1 already gone.
_DROP_ONE: Final = Script(f"""
local f = redis.call('HMGET', KEYS[1], 'status', 'updated')
if not f[1] then return -1 end
local paused = f[1] == '{PAUSED}'
if f[1] == '{RUNNING}' or paused ~= (ARGV[2] == '{PAUSED}') then return 0 end
if tonumber(f[2]) >= tonumber(ARGV[1]) then return 0 end
redis.call('DEL', KEYS[1])
return 1
""")
#: Records a cluster's ``expire`` looks at per call and index (as one server's script).
_EXPIRE_BATCH: Final = 1000


@final
class RedisRecordStore:
    """A ``RecordStore`` of ``kind`` records on a ``RedisLog``'s server and connection."""

    def __init__(self, commands: Line, prefix: str, kind: str) -> None:
        self._commands = commands
        self._kind = kind
        self._record_prefix = f"{prefix}:{kind}:"
        base = f"{prefix}:{kind}s:"
        if commands.cluster:
            base += f"{{{base[:-1]}}}:"  # one slot for the index: its own name as the hash tag
        self._sets = [f"{base}running", f"{base}settled", f"{base}paused"]
        self._versions = f"{base}ver"

    def _keys(self, record_id: str) -> list[str]:
        return [f"{self._record_prefix}{{{record_id}}}", *self._sets]

    async def _do(self, what: str, script: Script | None, keys: list[str],
                  args: list[Any]) -> Any:
        commands = self._commands
        if commands.closed:
            raise LogError("the Redis log is closed")
        try:
            if script is None:
                return await commands.call_at(args[1], *args)
            return await evalsha(commands, script, keys, args)
        except NotSent as exc:
            raise LogError(f"the Redis {self._kind} records failed to {what}: cannot reach "
                           f"Redis at {commands.url} ({exc}); nothing was changed",
                           retryable=True) from exc
        except (redis_errors.RedisError, *REDIS_DOWN) as exc:
            raise LogError(f"the Redis {self._kind} records failed to {what}: {exc}",
                           retryable=isinstance(exc, redis_errors.ConnectionError)) from exc

    async def insert(self, record: StoredRecord) -> StoredRecord | None:
        if self._commands.cluster:
            stored = await self._do("insert", _INSERT_ONE, self._keys(record.id)[:1],
                                    _args(record))
            if stored is None:
                await self._reindex(record)
        else:
            stored = await self._do("insert", _INSERT, self._keys(record.id), _args(record))
        return None if stored is None else _stored(record.id, stored)

    async def _reindex(self, record: StoredRecord) -> None:
        """Cluster: index the record just written (its own command; best-effort)."""
        with contextlib.suppress(LogError):  # the record is stored: the index catches up later
            await self._do("index", _REINDEX, [self._versions, *self._sets], [
                record.id, record.version, record.status, "", record.updated_at])

    async def get(self, record_id: str) -> StoredRecord | None:
        found = await self._do("read", None, [], [
            "HMGET", self._keys(record_id)[0], "version", "status", "updated", "body"])
        return None if found[3] is None else _stored(record_id, found)

    async def swap(self, record: StoredRecord) -> bool:
        if not self._commands.cluster:
            return bool(await self._do("update", _SWAP, self._keys(record.id), _args(record)))
        done = bool(await self._do("update", _SWAP_ONE, self._keys(record.id)[:1],
                                   _args(record)))
        if done:
            await self._reindex(record)
        return done

    async def running(self) -> list[str]:
        ids = await self._do("list the running", None, [], ["SMEMBERS", self._sets[0]])
        return sorted(i.decode() if isinstance(i, bytes) else str(i) for i in ids)

    async def expire(self, before: float, *, paused_before: float | None = None) -> int:
        if self._commands.cluster:
            count = await self._expire_apart(self._sets[1], before, "settled")
            if paused_before is not None:
                count += await self._expire_apart(self._sets[2], paused_before, PAUSED)
            return count
        count = await self._do("expire", _EXPIRE, [self._sets[1]],
                               [before, self._record_prefix])
        if paused_before is not None:
            count += await self._do("expire", _EXPIRE, [self._sets[2]],
                                    [paused_before, self._record_prefix])
        return int(count)

    async def _expire_apart(self, index: str, before: float, which: str) -> int:
        """Cluster: the records ``index`` lists as last changed before ``before``, each deleted
        if it still is what the index says, and unlisted once gone."""
        due = await self._do("expire", None, [], [
            "ZRANGEBYSCORE", index, "-inf", f"({before}", "LIMIT", 0, _EXPIRE_BATCH])
        count = 0
        for raw in due:
            record_id = raw.decode()
            dropped = int(await self._do("expire", _DROP_ONE, self._keys(record_id)[:1],
                                         [before, which]))
            if dropped:
                await self._do("expire", None, [], ["ZREM", index, record_id])
                await self._do("expire", None, [], ["HDEL", self._versions, record_id])
                count += dropped > 0
        return count

    async def aclose(self) -> None:
        return None  # the connection is the log's: RedisLog.aclose closes it


def _args(record: StoredRecord) -> list[Any]:
    return [record.id, record.version, record.status, record.body, record.updated_at]


def _stored(record_id: str, fields: list[Any]) -> StoredRecord:
    version, status, updated, body = fields
    return StoredRecord(record_id, bytes(status).decode(), int(version),
                        float(updated) if updated is not None else 0.0, bytes(body))
