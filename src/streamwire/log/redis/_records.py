"""``RedisRunStore``: run records on the stream log's Redis server, under its prefix
(``{prefix}:run:{<id>}``, a hash of version, status and body; the set ``{prefix}:runs:running``
and the sorted set ``{prefix}:runs:settled`` of the others by time of last change),
so every server process on that Redis answers for every run. Insert and compare-and-set are Lua
scripts: the record and the running set change together or not at all."""

from __future__ import annotations

from typing import Any, Final, cast

from ..errors import LogError
from ._record import RunRecord, decode_record, encode_record

try:
    import redis.asyncio as aioredis
    from redis import exceptions as redis_errors
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError('the Redis run store needs redis: pip install "streamwire[redis]"') from exc

__all__ = ["RedisRunStore"]

# KEYS: record, running set, settled zset; ARGV: id, version, status, body, updated_at.
# Returns the stored body or nil.
_INSERT: Final = """
local body = redis.call('HGET', KEYS[1], 'body')
if body then return body end
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'status', ARGV[3], 'body', ARGV[4])
if ARGV[3] == 'running' then redis.call('SADD', KEYS[2], ARGV[1])
else redis.call('ZADD', KEYS[3], ARGV[5], ARGV[1]) end
return false
"""
# KEYS: record, running set, settled zset; ARGV: id, new version, status, body, updated_at.
# Returns 1 when swapped.
_SWAP: Final = """
local v = redis.call('HGET', KEYS[1], 'version')
if not v or tonumber(v) ~= tonumber(ARGV[2]) - 1 then return 0 end
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'status', ARGV[3], 'body', ARGV[4])
if ARGV[3] == 'running' then
  redis.call('SADD', KEYS[2], ARGV[1]); redis.call('ZREM', KEYS[3], ARGV[1])
else redis.call('SREM', KEYS[2], ARGV[1]); redis.call('ZADD', KEYS[3], ARGV[5], ARGV[1]) end
return 1
"""
# KEYS: settled zset; ARGV: before, record key prefix. Deletes those settled before; their count.
_EXPIRE: Final = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'LIMIT', 0, 1000)
for _, id in ipairs(ids) do
  redis.call('DEL', ARGV[2] .. '{' .. id .. '}')
  redis.call('ZREM', KEYS[1], id)
end
return #ids
"""


class RedisRunStore:
    """A ``RunStore`` on the Redis server at ``url``, keys under ``prefix`` (the log's)."""

    def __init__(self, url: str, *, prefix: str = "streamwire", timeout: float = 5.0) -> None:
        self.url = url
        self.prefix = prefix
        self._client: Any = aioredis.Redis.from_url(  # pyright: ignore[reportUnknownMemberType]
            url, socket_timeout=timeout, socket_connect_timeout=timeout)
        self._insert: Any = self._client.register_script(_INSERT)
        self._swap: Any = self._client.register_script(_SWAP)
        self._expire: Any = self._client.register_script(_EXPIRE)
        self._running_key = f"{prefix}:runs:running"
        self._settled_key = f"{prefix}:runs:settled"

    def _key(self, run_id: str) -> str:
        return f"{self.prefix}:run:{{{run_id}}}"

    async def _do(self, what: str, call: Any) -> Any:
        try:
            return await call
        except redis_errors.RedisError as exc:
            raise LogError(f"the Redis run store failed to {what}: {exc}",
                           retryable=isinstance(exc, redis_errors.ConnectionError)) from exc

    async def insert(self, record: RunRecord) -> RunRecord | None:
        stored = await self._do("insert a run", self._insert(
            keys=[self._key(record.run_id), self._running_key, self._settled_key],
            args=[record.run_id, record.version, record.status, encode_record(record),
                  record.updated_at]))
        return None if stored is None else decode_record(cast(bytes, stored))

    async def get(self, run_id: str) -> RunRecord | None:
        body = await self._do("read a run", self._client.hget(self._key(run_id), "body"))
        return None if body is None else decode_record(cast(bytes, body))

    async def swap(self, record: RunRecord) -> bool:
        done = await self._do("update a run", self._swap(
            keys=[self._key(record.run_id), self._running_key, self._settled_key],
            args=[record.run_id, record.version, record.status, encode_record(record),
                  record.updated_at]))
        return bool(done)

    async def running(self) -> list[str]:
        ids = await self._do("list running runs", self._client.smembers(self._running_key))
        return sorted(i.decode() if isinstance(i, bytes) else str(i) for i in ids)

    async def expire(self, before: float) -> int:
        count = await self._do("expire runs", self._expire(
            keys=[self._settled_key], args=[before, f"{self.prefix}:run:"]))
        return int(count)

    async def aclose(self) -> None:
        await self._client.aclose()
