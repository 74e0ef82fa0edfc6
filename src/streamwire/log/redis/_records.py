"""``RedisRecordStore``: versioned records on the stream log's Redis server, under its prefix, sent
on the log's own command connection (auto-pipelined: a burst of callers queues on one socket,
none is refused). For records of kind ``k``: ``{prefix}:k:{<id>}`` is a hash of version, status,
updated (time of the last change) and body; the set ``{prefix}:ks:running`` holds the ids of the
running ones, the sorted set ``{prefix}:ks:paused`` the paused ones and ``{prefix}:ks:settled``
the others, both by time of last change (for ``"run"``: ``run:{<id>}``, ``runs:running``,
``runs:settled``, ``runs:paused``). Insert and compare-and-set are Lua scripts: the record and its
index change together or not at all."""

from __future__ import annotations

from typing import Any, Final, final

from redis import exceptions as redis_errors

from ...errors import LogError
from .._records import PAUSED, RUNNING, StoredRecord
from ._commands import REDIS_DOWN, Commands, NotSent
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


@final
class RedisRecordStore:
    """A ``RecordStore`` of ``kind`` records on a ``RedisLog``'s server and connection."""

    def __init__(self, commands: Commands, prefix: str, kind: str) -> None:
        self._commands = commands
        self._kind = kind
        self._record_prefix = f"{prefix}:{kind}:"
        self._sets = [f"{prefix}:{kind}s:running", f"{prefix}:{kind}s:settled",
                      f"{prefix}:{kind}s:paused"]

    def _keys(self, record_id: str) -> list[str]:
        return [f"{self._record_prefix}{{{record_id}}}", *self._sets]

    async def _do(self, what: str, script: Script | None, keys: list[str],
                  args: list[Any]) -> Any:
        commands = self._commands
        if commands.closed:
            raise LogError("the Redis log is closed")
        try:
            if script is None:
                return await commands.call(*args)
            return await evalsha(commands, script, keys, args)
        except NotSent as exc:
            raise LogError(f"the Redis {self._kind} records failed to {what}: cannot reach "
                           f"Redis at {commands.url} ({exc}); nothing was changed",
                           retryable=True) from exc
        except (redis_errors.RedisError, *REDIS_DOWN) as exc:
            raise LogError(f"the Redis {self._kind} records failed to {what}: {exc}",
                           retryable=isinstance(exc, redis_errors.ConnectionError)) from exc

    async def insert(self, record: StoredRecord) -> StoredRecord | None:
        stored = await self._do("insert", _INSERT, self._keys(record.id), [
            record.id, record.version, record.status, record.body, record.updated_at])
        return None if stored is None else _stored(record.id, stored)

    async def get(self, record_id: str) -> StoredRecord | None:
        found = await self._do("read", None, [], [
            "HMGET", self._keys(record_id)[0], "version", "status", "updated", "body"])
        return None if found[3] is None else _stored(record_id, found)

    async def swap(self, record: StoredRecord) -> bool:
        done = await self._do("update", _SWAP, self._keys(record.id), [
            record.id, record.version, record.status, record.body, record.updated_at])
        return bool(done)

    async def running(self) -> list[str]:
        ids = await self._do("list the running", None, [], ["SMEMBERS", self._sets[0]])
        return sorted(i.decode() if isinstance(i, bytes) else str(i) for i in ids)

    async def expire(self, before: float, *, paused_before: float | None = None) -> int:
        count = await self._do("expire", _EXPIRE, [self._sets[1]],
                               [before, self._record_prefix])
        if paused_before is not None:
            count += await self._do("expire", _EXPIRE, [self._sets[2]],
                                    [paused_before, self._record_prefix])
        return int(count)

    async def aclose(self) -> None:
        return None  # the connection is the log's: RedisLog.aclose closes it


def _stored(record_id: str, fields: list[Any]) -> StoredRecord:
    version, status, updated, body = fields
    return StoredRecord(record_id, bytes(status).decode(), int(version),
                        float(updated) if updated is not None else 0.0, bytes(body))
