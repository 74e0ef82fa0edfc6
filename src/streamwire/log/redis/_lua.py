"""The Lua functions ``RedisLog``'s scripts share (``streamwire.log.redis._scripts`` prepends them):
the idempotent-producer rule, the writer's lease and the stream index that ``list_streams`` pages
through. Placeholders (``@MAX_PRODUCER_BATCHES@``) are filled in by ``_scripts``."""

from __future__ import annotations

from typing import Final

__all__ = ["INDEX", "INDEX_CLUSTER", "LEASE", "PRODUCER", "REINDEX"]

# The idempotent-producer rule of ``streamwire.log._producers`` (admit, record) in Lua, prepended
# to the scripts that write. ARGV[p], ARGV[p + 1], ARGV[p + 2]: producer id ('' for none), epoch
# and seq as decimal text. The state is the meta hash field p:<id> in the text form of
# ProducerState ("<epoch> <last seq> <seq>:<first>:<count> ..."). Numbers are printed with %d:
# Lua's own printing loses digits above 1e14.
PRODUCER: Final = """
local function producer_admit(m, p)
  local pid = ARGV[p]
  if pid == '' then return 'none' end
  local epoch, seq = tonumber(ARGV[p + 1]), tonumber(ARGV[p + 2])
  local raw = redis.call('HGET', m, 'p:' .. pid)
  if raw then
    local t = {}
    for tok in string.gmatch(raw, '%S+') do t[#t + 1] = tok end
    local cur, last = tonumber(t[1]), tonumber(t[2])
    if epoch < cur then return nil, 'SWPEPOCH ' .. t[1] .. ' ' .. ARGV[p + 1] end
    if epoch == cur then
      local expected = string.format('%d', last + 1)
      if seq == last + 1 then return 'new', raw end
      if seq > last then return nil, 'SWPSEQ ' .. expected .. ' ' .. ARGV[p + 2] .. ' gap' end
      for i = 3, #t do
        local s, f, c = string.match(t[i], '^(%d+):(%d+):(%d+)$')
        if tonumber(s) == seq then return 'dup', tonumber(f), tonumber(c) end
      end
      return nil, 'SWPSEQ ' .. expected .. ' ' .. ARGV[p + 2] .. ' old'
    end
  end
  if seq ~= 0 then return nil, 'SWPSEQ 0 ' .. ARGV[p + 2] .. ' epoch' end
  return 'new', false
end

local function producer_record(m, p, raw, first, count)
  local pid = ARGV[p]
  if pid == '' then return end
  local recent = {}
  if raw then
    local t = {}
    for tok in string.gmatch(raw, '%S+') do t[#t + 1] = tok end
    if tonumber(t[1]) == tonumber(ARGV[p + 1]) then
      for i = math.max(3, #t - @MAX_PRODUCER_BATCHES@ + 2), #t do recent[#recent + 1] = t[i] end
    end
  end
  recent[#recent + 1] = ARGV[p + 2] .. ':' .. string.format('%d', first) .. ':'
    .. string.format('%d', count)
  redis.call('HSET', m, 'p:' .. pid, ARGV[p + 1] .. ' ' .. ARGV[p + 2] .. ' '
    .. table.concat(recent, ' '))
end
"""

# The writer's lease (the rule of streamwire.log._common.WRITER_GONE): the meta field lease is the
# Redis server's clock (ms) when it lapses; writes refuse a lapsed stream (SWLAPSED: the caller then
# runs the lapse script, which fails it once) and renew it.
LEASE: Final = """
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function lapsed(m)
  local lease = tonumber(redis.call('HGET', m, 'lease') or '0')
  return lease > 0 and now_ms() >= lease
end

local function renew(m, ms)
  redis.call('HSET', m, 'lease', string.format('%d', now_ms() + tonumber(ms)))
end
"""

# The stream index (the rule of RedisLog.list_streams; needs LEASE): KEYS[3] is a sorted set of
# every stream's id (score 0, paged with ZRANGEBYLEX: byte order, which is codepoint order for
# UTF-8), KEYS[4] the finished streams that expire, scored by when (ms, Redis's clock), so expired
# ids leave the index without a scan of it. A script that changes the index gets the stream's id
# as its last argument. Whatever Redis drops by itself (an eviction) is unlisted when a listing
# finds it gone.
INDEX: Final = """
local function listed()
  redis.call('ZADD', KEYS[3], 0, ARGV[#ARGV])
  redis.call('ZREM', KEYS[4], ARGV[#ARGV])
end

local function unlisted()
  redis.call('ZREM', KEYS[3], ARGV[#ARGV])
  redis.call('ZREM', KEYS[4], ARGV[#ARGV])
end

local function expire_in(ttl)
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
  redis.call('ZADD', KEYS[4], now_ms() + ttl, ARGV[#ARGV])
end

local function prune(ix, ex, n)
  local due = redis.call('ZRANGEBYSCORE', ex, '-inf', now_ms(), 'LIMIT', 0, n)
  if #due > 0 then
    redis.call('ZREM', ix, unpack(due))
    redis.call('ZREM', ex, unpack(due))
  end
end

local function prune_listed(n)
  prune(KEYS[3], KEYS[4], n)
end
"""

# INDEX in cluster mode, for a stream's scripts: the index lives in another slot, which a script
# may not touch, so the stream's scripts only expire the stream's own keys; RedisLog changes the
# index afterwards with REINDEX (a separate command: best-effort, see docs/guides/redis-cluster.md).
INDEX_CLUSTER: Final = """
local function listed() end

local function unlisted() end

local function expire_in(ttl)
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end

local function prune_listed(n) end
"""

# KEYS: the stream index and its expiry set (one slot). ARGV: op, stream id, ttl ms. The index
# change a stream's script made on one server, made apart on a cluster ('list', 'unlist',
# 'expire': listed and expiring in ttl), and the index migration ('migrate': list the id if it is
# missing, expiring in ttl when ttl > 0; 1 when it was missing). Needs LEASE and INDEX.
REINDEX: Final = """
local op, id, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
if op == 'list' then
  redis.call('ZADD', KEYS[1], 0, id)
  redis.call('ZREM', KEYS[2], id)
  prune(KEYS[1], KEYS[2], 16)
elseif op == 'unlist' then
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
elseif op == 'expire' then
  redis.call('ZADD', KEYS[1], 0, id)
  redis.call('ZADD', KEYS[2], now_ms() + ttl, id)
elseif op == 'migrate' then
  local added = redis.call('ZADD', KEYS[1], 'NX', 0, id)
  if ttl > 0 then redis.call('ZADD', KEYS[2], 'NX', now_ms() + ttl, id) end
  return added
end
return 1
"""
