"""The Lua scripts of ``RedisLog`` (one per change, plus the atomic page read), the wrapper that
sends them by SHA1, the mapping of their ``SW…`` error replies to typed errors, and the kinds of
message they publish on a stream's channel."""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Sequence
from typing import Any, Final, final

from redis import exceptions as redis_errors

from ...errors import LogError, StreamNotFoundError, StreamStateError
from .._producers import MAX_PRODUCER_BATCHES, epoch_error, sequence_error
from ._commands import REDIS_DOWN, NotSent
from ._line import Line
from ._lua import INDEX as _INDEX
from ._lua import INDEX_CLUSTER as _INDEX_CLUSTER
from ._lua import LEASE as _LEASE
from ._lua import PRODUCER as _PRODUCER
from ._lua import REINDEX as _REINDEX

__all__ = [
    "CLUSTER_SCRIPTS",
    "MAX_MARKERS",
    "META_FIELDS",
    "READ_ONLY",
    "SCRIPTS",
    "LeaseLapsedError",
    "LiveKind",
    "Script",
    "evalsha",
    "list_ids",
    "map_reply",
    "run_index",
    "run_script",
]


class LiveKind(enum.StrEnum):
    """What a message on a stream's pub/sub channel says: its first byte. A message is
    ``<kind><epoch> <number>[ <sizes> <trimmed>]\\n<body>``."""

    #: Chunks appended: number is the first sequence, then each chunk's size and the highest
    #: sequence retention had removed after the append; the body is the chunks, concatenated.
    CHUNKS = "c"
    #: The stream ended (number: the head); the body is the ``end`` frame's JSON.
    END = "e"
    #: The stream failed (number: the head); the body is the ``fail`` frame's JSON.
    FAIL = "f"
    #: A cleanup ran (number: the marker's number); the body is the ``rewound`` frame's JSON.
    REWOUND = "w"
    #: The stream was deleted.
    DELETED = "x"
    #: Never published: a local reader's queue overflowed, it must read pages.
    OVERFLOW = "o"
    #: Never published: the log closed.
    CLOSED = "z"
    #: Never published: a parked reader's look at the writer's lease is due.
    DUE = "d"


#: ``rewound`` markers kept per stream (``rw:<number>`` fields of the meta hash); a reader owed
#: an older one gets a recoverable ``fail`` and re-attaches.
MAX_MARKERS: Final = 1024
#: The meta hash fields a page reads, in this order.
META_FIELDS: Final = ("epoch", "head", "status", "run", "tfloor", "nrew", "marker", "term",
                      "lease")


def _lua(source: str, *, cluster: bool = False) -> str:
    """``source`` with the ``@KIND@`` placeholders replaced by the message kinds' letters; for a
    cluster, with the index left to ``REINDEX`` and sharded pub/sub (``SPUBLISH``: the message
    goes to the slot's shard only, where its readers subscribed, not to every node)."""
    for kind in LiveKind:
        source = source.replace(f"@{kind.name}@", kind.value)
    source = source.replace("@MAX_PRODUCER_BATCHES@", str(MAX_PRODUCER_BATCHES))
    if cluster:
        if _INDEX in source:
            source = source.replace(_INDEX, _INDEX_CLUSTER)
        source = source.replace("redis.call('PUBLISH'", "redis.call('SPUBLISH'")
    return source.replace("@MAX_MARKERS@", str(MAX_MARKERS))

# --------------------------------------------------------------------------------------------
# Lua. Every stream's script gets the meta hash (KEYS[1]), the chunk stream (KEYS[2]), the
# stream index and its expiry set (KEYS[3], KEYS[4]; not on a cluster: see _lua.INDEX_CLUSTER),
# the channel as ARGV[1] and the stream id as
# the last argument; errors are "SW<kind> <detail>" replies that map_reply() turns into typed
# errors. Lua prints integral doubles below 1e14 as integers, far above any sequence.


# ARGV: channel, max chunks, max bytes, n, n x (step, chunk), producer (3), writer timeout ms.
# Returns the first sequence, or {first, count} for a producer's repeated request.
_APPEND: Final = _PRODUCER + _LEASE + """
local m, xs = KEYS[1], KEYS[2]
local st = redis.call('HGET', m, 'status')
if not st then return redis.error_reply('SWNOTFOUND') end
local n = tonumber(ARGV[4])
local pa = 5 + 2 * n
local verdict, pstate, pcount = producer_admit(m, pa)
if not verdict then return redis.error_reply(pstate) end
if verdict == 'dup' then return {pstate, pcount} end
if st ~= 'active' then return redis.error_reply('SWSTATE ' .. st) end
if lapsed(m) then return redis.error_reply('SWLAPSED') end
renew(m, ARGV[pa + 3])
if n == 0 then
  local nxt = tonumber(redis.call('HGET', m, 'head')) + 1
  producer_record(m, pa, pstate, nxt, 0)
  return nxt
end
local head = redis.call('HINCRBY', m, 'head', n)
local first = head - n + 1
local lens, parts, size = {}, {}, 0
local ls = tonumber(redis.call('HGET', m, 'lstep') or '-1')
local mono = true
for i = 1, n do
  local step, c = ARGV[3 + 2 * i], ARGV[4 + 2 * i]
  redis.call('XADD', xs, (first + i - 1) .. '-0', 's', step, 'c', c)
  local s = tonumber(step)
  if s < ls then mono = false end
  ls = s
  lens[i] = #c
  parts[i] = c
  size = size + #c
end
redis.call('HSET', m, 'lstep', ls)
if not mono then redis.call('HSET', m, 'mono', '0') end
local bytes = redis.call('HINCRBY', m, 'bytes', size)
local maxc, maxb = tonumber(ARGV[2]), tonumber(ARGV[3])
local over = redis.call('XLEN', xs) - maxc
if over > 0 or bytes > maxb then
  local tf, from = 0, '-'
  while over > 0 or bytes > maxb do
    local batch = redis.call('XRANGE', xs, from, '+', 'COUNT', 128)
    if #batch == 0 then break end
    for _, e in ipairs(batch) do
      if over <= 0 and bytes <= maxb then break end
      over = over - 1
      bytes = bytes - #e[2][4]
      tf = tonumber(string.sub(e[1], 1, -3))
      from = '(' .. e[1]
    end
  end
  redis.call('XTRIM', xs, 'MINID', (tf + 1) .. '-0')
  redis.call('HSET', m, 'bytes', bytes, 'tfloor', tf)
end
local ep, tf = redis.call('HGET', m, 'epoch'), redis.call('HGET', m, 'tfloor')
redis.call('PUBLISH', ARGV[1], '@CHUNKS@' .. ep .. ' ' .. first .. ' ' .. table.concat(lens, ',') .. ' '
  .. tf .. '\\n' .. table.concat(parts))
producer_record(m, pa, pstate, first, n)
return first
"""

# ARGV: channel, epoch, writer timeout ms. Returns 1 when created, 0 when it existed. Each
# creation also drops a few expired ids from the index, so it stays bounded without a listing.
_CREATE: Final = _LEASE + _INDEX + """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'epoch', ARGV[2], 'head', 0, 'status', 'active', 'run', 0,
  'bytes', 0, 'tfloor', 0, 'nrew', 0)
renew(KEYS[1], ARGV[3])
listed()
prune_listed(16)
return 1
"""

# ARGV: channel, writer timeout ms.
_KEEPALIVE: Final = _LEASE + """
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return redis.error_reply('SWNOTFOUND') end
if st ~= 'active' then return redis.error_reply('SWSTATE ' .. st) end
if lapsed(KEYS[1]) then return redis.error_reply('SWLAPSED') end
renew(KEYS[1], ARGV[2])
return 1
"""

# ARGV: channel, ttl ms, the WRITER_GONE fail frame's JSON. Fails an active stream whose lease
# lapsed (and publishes it); returns 1 when it did, 0 when there was nothing to do.
_LAPSE: Final = _LEASE + _INDEX + """
local m, xs = KEYS[1], KEYS[2]
if redis.call('HGET', m, 'status') ~= 'active' or not lapsed(m) then return 0 end
redis.call('HSET', m, 'status', 'failed', 'term', ARGV[3])
local ttl = tonumber(ARGV[2])
if ttl > 0 then expire_in(ttl) end
local ep, head = redis.call('HGET', m, 'epoch'), redis.call('HGET', m, 'head')
redis.call('PUBLISH', ARGV[1], '@FAIL@' .. ep .. ' ' .. head .. '\\n' .. ARGV[3])
return 1
"""

# ARGV: channel, status, terminal JSON, ttl ms, kind letter (LiveKind.END or FAIL), producer (3).
_FINISH: Final = _PRODUCER + _LEASE + _INDEX + """
local m, xs = KEYS[1], KEYS[2]
local st = redis.call('HGET', m, 'status')
if not st then return redis.error_reply('SWNOTFOUND') end
local verdict, pstate = producer_admit(m, 6)
if not verdict then return redis.error_reply(pstate) end
if verdict == 'dup' then return 1 end
if st ~= 'active' then return redis.error_reply('SWSTATE ' .. st) end
if lapsed(m) then return redis.error_reply('SWLAPSED') end
redis.call('HSET', m, 'status', ARGV[2], 'term', ARGV[3])
local ttl = tonumber(ARGV[4])
if ttl > 0 then expire_in(ttl) end
local ep, head = redis.call('HGET', m, 'epoch'), redis.call('HGET', m, 'head')
redis.call('PUBLISH', ARGV[1], ARGV[5] .. ep .. ' ' .. head .. '\\n' .. ARGV[3])
producer_record(m, 6, pstate, tonumber(head) + 1, 0)
return 1
"""

# ARGV: channel, step. Removes the chunks of steps after `step` (walking back from the newest
# while steps were appended in order, else scanning all), sets the marker, counts the cleanup,
# stores the rewound frame as field rw:<count> (the last MAX_MARKERS are kept) and publishes it.
# Returns {rewound JSON, cleanup count, epoch}.
_CLEANUP: Final = """
local m, xs = KEYS[1], KEYS[2]
if redis.call('EXISTS', m) == 0 then return redis.error_reply('SWNOTFOUND') end
local step = tonumber(ARGV[2])
local ids, low, freed = {}, 0, 0
local function take(e)
  ids[#ids + 1] = e[1]
  freed = freed + #e[2][4]
  local seq = tonumber(string.sub(e[1], 1, -3))
  if low == 0 or seq < low then low = seq end
end
if redis.call('HGET', m, 'mono') ~= '0' then
  local from = '+'
  while true do
    local batch = redis.call('XREVRANGE', xs, from, '-', 'COUNT', 256)
    local stop = #batch < 256
    for _, e in ipairs(batch) do
      if tonumber(e[2][2]) > step then take(e) else stop = true; break end
      from = '(' .. e[1]
    end
    if stop then break end
  end
else
  local from = '-'
  while true do
    local batch = redis.call('XRANGE', xs, from, '+', 'COUNT', 256)
    for _, e in ipairs(batch) do
      if tonumber(e[2][2]) > step then take(e) end
      from = '(' .. e[1]
    end
    if #batch < 256 then break end
  end
end
for i = 1, #ids, 1000 do
  redis.call('XDEL', xs, unpack(ids, i, math.min(i + 999, #ids)))
end
if freed > 0 then redis.call('HINCRBY', m, 'bytes', -freed) end
local head = redis.call('HGET', m, 'head')
local rw = '{"atStep":' .. ARGV[2] .. ',"atSequence":' .. head
if low > 0 then rw = rw .. ',"minSequence":' .. (low - 1) end
rw = rw .. '}'
local nrew = redis.call('HINCRBY', m, 'nrew', 1)
redis.call('HSET', m, 'marker', ARGV[2], 'rw:' .. nrew, rw)
redis.call('HDEL', m, 'rw:' .. (nrew - @MAX_MARKERS@))
local ep = redis.call('HGET', m, 'epoch')
redis.call('PUBLISH', ARGV[1], '@REWOUND@' .. ep .. ' ' .. nrew .. '\\n' .. rw)
return {rw, nrew, ep}
"""

# ARGV: channel, mode ('reset' | 'reactivate'), writer timeout ms.
_RESTART: Final = _LEASE + _INDEX + """
local m, xs = KEYS[1], KEYS[2]
local st = redis.call('HGET', m, 'status')
if not st then return redis.error_reply('SWNOTFOUND') end
if ARGV[2] == 'reset' then
  redis.call('DEL', xs)
  redis.call('HSET', m, 'status', 'active', 'run', redis.call('HGET', m, 'head'), 'bytes', 0,
    'tfloor', 0, 'mono', '1', 'lstep', -1)
else
  if st == 'active' then return redis.error_reply('SWSTATE active') end
  redis.call('HSET', m, 'status', 'active')
  redis.call('PERSIST', xs)
end
redis.call('HDEL', m, 'marker', 'term')
redis.call('PERSIST', m)
renew(m, ARGV[3])
listed()
return 1
"""

# ARGV: channel.
_DELETE: Final = _LEASE + _INDEX + """
local ep = redis.call('HGET', KEYS[1], 'epoch')
if not ep then return redis.error_reply('SWNOTFOUND') end
redis.call('DEL', KEYS[1], KEYS[2])
unlisted()
redis.call('PUBLISH', ARGV[1], '@DELETED@' .. ep .. ' 0\\n')
return 1
"""

# ARGV: channel (unused), after (exclusive), count, mark. Returns {} for an unknown stream, else
# {META_FIELDS' values, lowest retained sequence or 0, {id, chunk, id, chunk, ...}, number and
# JSON of the oldest kept marker numbered above mark (0 and false when none), the server's clock
# (ms)}, read atomically.
_PAGE_SCRIPT: Final = _LEASE + """
local meta = redis.call('HMGET', KEYS[1], 'epoch', 'head', 'status', 'run', 'tfloor', 'nrew',
  'marker', 'term', 'lease')
if not meta[1] then return {} end
local low = 0
local first = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)
if #first > 0 then low = tonumber(string.sub(first[1][1], 1, -3)) end
local out = {}
local count = tonumber(ARGV[3])
if count > 0 then
  local batch = redis.call('XRANGE', KEYS[2], '(' .. ARGV[2] .. '-0', '+', 'COUNT', count)
  for _, e in ipairs(batch) do
    out[#out + 1] = e[1]
    out[#out + 1] = e[2][4]
  end
end
local nrew, mark = tonumber(meta[6]), tonumber(ARGV[4])
local idx, rw = 0, false
if mark < nrew then
  idx = math.max(mark + 1, nrew - @MAX_MARKERS@ + 1)
  rw = redis.call('HGET', KEYS[1], 'rw:' .. idx)
end
return {meta, low, out, idx, rw, now_ms()}
"""


# ARGV: channel. Unlists a stream whose keys are gone (Redis evicted them); 1 when it did.
_UNLIST: Final = _LEASE + _INDEX + """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
unlisted()
return 1
"""

# KEYS: the stream index and its expiry set only. ARGV: after ('' for the first page), count.
# Drops up to count expired ids, then returns up to count listed ids above after, in byte order.
_LIST: Final = _LEASE + _INDEX + """
prune(KEYS[1], KEYS[2], tonumber(ARGV[2]))
local from = '-'
if ARGV[1] ~= '' then from = '(' .. ARGV[1] end
return redis.call('ZRANGEBYLEX', KEYS[1], from, '+', 'LIMIT', 0, tonumber(ARGV[2]))
"""


@final
class Script:
    """A Lua script with its SHA1, sent with ``EVALSHA`` and loaded on ``NOSCRIPT``."""

    __slots__ = ("sha", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()


_SOURCES: Final = (
    ("append", _APPEND), ("create", _CREATE), ("finish", _FINISH), ("cleanup", _CLEANUP),
    ("restart", _RESTART), ("delete", _DELETE), ("page", _PAGE_SCRIPT),
    ("keepalive", _KEEPALIVE), ("lapse", _LAPSE), ("unlist", _UNLIST), ("list", _LIST),
    ("reindex", _LEASE + _INDEX + _REINDEX))
#: The scripts on one server.
SCRIPTS: Final = {name: Script(_lua(src)) for name, src in _SOURCES}
#: The scripts on a cluster: a stream's touch its own slot only (the index is changed apart).
CLUSTER_SCRIPTS: Final = {name: Script(_lua(src, cluster=name not in ("list", "reindex")))
                          for name, src in _SOURCES}

#: Scripts that change nothing (or nothing twice): safe to retry after an unknown outcome.
READ_ONLY: Final = frozenset({"page", "create", "keepalive", "lapse", "unlist", "reindex"})


class LeaseLapsedError(StreamStateError):
    """A write found the stream's writer lease lapsed: the caller fails the stream (the lapse
    script), then raises this (a ``StreamStateError``)."""


async def _evalsha(commands: Line, name: str, keys: Sequence[str],
                   args: Sequence[Any]) -> Any:
    """Script ``name``'s reply, sent by SHA1 (and loaded on ``NOSCRIPT``)."""
    scripts = CLUSTER_SCRIPTS if commands.cluster else SCRIPTS
    return await evalsha(commands, scripts[name], keys, args)


async def evalsha(commands: Line, script: Script, keys: Sequence[str],
                  args: Sequence[Any]) -> Any:
    """``script``'s reply, sent by SHA1 (and loaded on ``NOSCRIPT``)."""
    # every key of a script is in one slot (on a cluster): the first one routes it
    try:
        return await commands.call_at(keys[0], "EVALSHA", script.sha, len(keys), *keys, *args)
    except redis_errors.NoScriptError:
        # first use on this server (or after a restart / SCRIPT FLUSH): load, then retry
        await commands.call_at(keys[0], "SCRIPT", "LOAD", script.source)
        return await commands.call_at(keys[0], "EVALSHA", script.sha, len(keys), *keys, *args)


async def list_ids(commands: Line, index: tuple[str, str], after: str,
                   count: int) -> list[str]:
    """Up to ``count`` listed stream ids above ``after`` in byte order (expired ids are dropped
    from the index first; one that vanished otherwise may still be among them)."""
    url = commands.url
    try:
        reply: list[bytes] = await _evalsha(commands, "list", index, (after, count))
    except redis_errors.ResponseError as exc:
        raise LogError(f"listing the streams: Redis refused it: {exc}") from exc
    except (NotSent, *REDIS_DOWN) as exc:
        raise LogError(f"listing the streams failed: Redis at {url} failed ({exc}); retry",
                       retryable=True) from exc
    return [member.decode() for member in reply]


async def run_index(commands: Line, index: tuple[str, str], op: str, stream_id: str,
                    ttl: int) -> Any:
    """The ``REINDEX`` script (``_lua.REINDEX``) on ``index``: ``op`` for ``stream_id``."""
    try:
        return await _evalsha(commands, "reindex", index, (op, stream_id, ttl))
    except redis_errors.ResponseError as exc:
        raise LogError(f"indexing stream {stream_id!r}: Redis refused it: {exc}") from exc
    except (NotSent, *REDIS_DOWN) as exc:
        raise LogError(f"indexing stream {stream_id!r} failed: Redis at {commands.url} failed "
                       f"({exc}); retry", retryable=True) from exc


async def run_script(commands: Line, name: str, keys: tuple[str, str, str],
                     args: Sequence[Any], *, index: tuple[str, ...], stream_id: str, what: str,
                     producer_id: str = "") -> Any:
    """Run script ``name`` with ``keys`` (meta, chunks, channel) and the stream ``index`` (the
    index and its expiry set); its reply, or a typed error that says whether anything may have
    changed. On a cluster ``index`` is empty: a stream's script touches its own slot only."""
    meta, chunks, channel = keys
    url = commands.url
    try:
        reply = await _evalsha(commands, name, (meta, chunks, *index),
                               (channel, *args, stream_id))
    except NotSent as exc:
        raise LogError(f"{what} on stream {stream_id!r} failed: cannot reach Redis at "
                       f"{url} ({exc}); nothing was changed", retryable=True) from exc
    except redis_errors.ResponseError as exc:
        raise map_reply(exc, stream_id, what, producer_id) from None
    except REDIS_DOWN as exc:
        if name in READ_ONLY:
            raise LogError(f"{what} on stream {stream_id!r}: Redis at {url} failed "
                           f"({exc}); retry", retryable=True) from exc
        raise LogError(
            f"{what} on stream {stream_id!r}: the connection to Redis at {url} failed after "
            f"the command was sent ({exc}); it may or may not have been applied (a retry with "
            "the same producer= applies it exactly once; else compare info().head)") from exc
    return reply


def map_reply(exc: redis_errors.ResponseError, stream_id: str, what: str,
              producer_id: str = "") -> LogError:
    """Turn a script's ``SW…`` error reply (or any other Redis error) into a typed error."""
    text = str(exc)
    if text.startswith("SWPSEQ "):
        _, expected, received, why = text.split()
        return sequence_error(producer_id, int(expected), int(received), why)
    if text.startswith("SWLAPSED"):
        return LeaseLapsedError(f"cannot {what} stream {stream_id!r}: its writer's lease lapsed "
                                "(no append or keepalive within writer_timeout); it is failed")
    if text.startswith("SWPEPOCH "):
        _, current, received = text.split()
        return epoch_error(producer_id, int(current), int(received))
    if text.startswith("SWNOTFOUND"):
        return StreamNotFoundError(stream_id)
    if text.startswith("SWSTATE"):
        status = text.split()[1] if len(text.split()) > 1 else "?"
        return StreamStateError(f"cannot {what} stream {stream_id!r}: its status is {status}")
    error = LogError(f"{what} on stream {stream_id!r}: Redis refused it: {text}")
    error.__cause__ = exc
    return error
