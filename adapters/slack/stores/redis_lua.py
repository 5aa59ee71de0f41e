"""The Redis store's Lua scripts: each changes a record, its indexes and its audit together."""

from __future__ import annotations

from typing import Final

WRITE_TOKENS_KEPT: Final = 16
"""How many of a record's last write tokens ``p:tok:{id}`` keeps: a retry of one of them is
recognised as done; an older one is refused as stale (``mutate`` decides again)."""

# Lua: ``wrote(kept, token)``: whether ``token`` is among ``kept`` (the value of p:tok, or
# false when there is none); ``remember(kept, token)``: ``token`` before the newest of
# ``kept``, at most WRITE_TOKENS_KEPT in all (tokens are hex: no spaces).
_TOKENS: Final = f"""
local function wrote(kept, token)
  return kept and string.find(' ' .. kept .. ' ', ' ' .. token .. ' ', 1, true) ~= nil
end
local function remember(kept, token)
  local tokens = {{token}}
  for one in string.gmatch(kept or '', '%S+') do
    if #tokens >= {WRITE_TOKENS_KEPT} then break end
    tokens[#tokens + 1] = one
  end
  return table.concat(tokens, ' ')
end
"""

# A write's audit event (its JSON, '' for none) and chain are its last six ARGV, appended by
# the script that makes the change (both kept or neither); -1: the head moved, chain again.
# Everything is checked before anything is written: a script failing half-way is not undone.


def _trail_follows(record: str, trail: str, keep: str) -> str:
    """Lua: the question's stream lives as long as its record (``keep`` with no record)."""
    return f"""
local left = redis.call('PTTL', {record})
if left == -1 then
  redis.call('PERSIST', {trail})
elseif left >= 0 then
  redis.call('PEXPIRE', {trail}, math.max(left, 1))
else
  redis.call('PEXPIRE', {trail}, {keep})
end
"""


def _chain_ready(base: int, audit: str, trail: str, head: str) -> str:
    """Lua: read the event's chain ARGV from ``base`` on (``RedisPendingStore._chained``);
    before any write, refuse either audit key holding something else, and answer
    ``{-1, head, question's last chained hash}`` when either moved."""
    return f"""
local event, seq, prev, qprev, hash, want = unpack(ARGV, {base}, {base + 5})
if event ~= '' then
  for _, key in ipairs({{{audit}, {trail}}}) do
    local kind = redis.call('TYPE', key)['ok']
    if kind ~= 'none' and kind ~= 'stream' then
      return redis.error_reply('WRONGTYPE audit key ' .. key .. ' holds a ' .. kind)
    end
  end
  local now, got, high, count = redis.call('GET', {head}) or '', nil, '+', 1
  while not got do  -- the question's newest chained hash (past an earlier release's events)
    local page = redis.call('XREVRANGE', {trail}, high, '-', 'COUNT', count)
    for _, entry in ipairs(page) do
      local fields = entry[2]
      for i = 1, #fields, 2 do if not got and fields[i] == 'h' then got = fields[i + 1] end end
      high = '(' .. entry[1]
    end
    if #page < count then break end
    count = 16
  end
  got = got or ''
  if now ~= want or got ~= qprev then return {{-1, now, got}} end
end
"""


def _chain_append(audit: str, trail: str, head: str) -> str:
    """Lua: append the chained event to both streams and move the head to it."""
    return f"""
if event ~= '' then
  for _, key in ipairs({{{audit}, {trail}}}) do
    redis.call('XADD', key, '*', 'e', event, 'n', seq, 'p', prev, 'q', qprev, 'h', hash)
  end
  redis.call('SET', {head}, seq .. ' ' .. hash)
end
"""


# (after the record's write, so the question's stream takes the TTL it was just given)
_APPEND_EVENT: Final = f"""{_chain_append("KEYS[6]", "KEYS[7]", "KEYS[9]")}
{_trail_follows("KEYS[1]", "KEYS[7]", "ARGV[5]")}
return 1
"""

# KEYS: record, token, open set, owner set of the record's owner, owners set, audit stream,
#       question stream, audiences hash, chain head
# ARGV: json, id, version ('' to create), state, finished ttl ms, owner-set prefix, done
#       channel, token, owner ('' for none), audience ('' for on no list), event and its chain
# A pending record has no TTL: it stays until it ends (then it is kept ``finished_ttl``).
# An ending (or a record created ended: a lost record put back failed) is published on the
# done channel: other processes' waiters on it wake.
WRITE: Final = (
    _TOKENS
    + """
local kept = redis.call('GET', KEYS[2])
if wrote(kept, ARGV[8]) then return 1 end
local raw = redis.call('GET', KEYS[1])
local creating, was_open, old_owner = ARGV[3] == '', false, ''
if creating then
  if raw then return 0 end
else
  if not raw then return 0 end
  local stored = cjson.decode(raw)
  if tonumber(stored['version']) ~= tonumber(ARGV[3]) - 1 then return 0 end
  was_open = stored['state'] == 'pending'
  if not was_open and ARGV[4] ~= 'pending' and stored['state'] ~= ARGV[4] then return 0 end
  if type(stored['owner']) == 'string' then old_owner = stored['owner'] end
end
"""
    + _chain_ready(11, "KEYS[6]", "KEYS[7]", "KEYS[9]")
    + """
local old_owner_set = ARGV[6] .. old_owner
local ending, expiry = ARGV[4] ~= 'pending' and (was_open or creating), {}
if ending then expiry = {'PX', ARGV[5]} elseif ARGV[4] ~= 'pending' then expiry = {'KEEPTTL'} end
redis.call('SET', KEYS[1], ARGV[1], unpack(expiry))
redis.call('SET', KEYS[2], remember(kept, ARGV[8]), unpack(expiry))
if ARGV[4] == 'pending' then
  if old_owner ~= '' and old_owner ~= ARGV[9] then redis.call('SREM', old_owner_set, ARGV[2]) end
  redis.call('SADD', KEYS[3], ARGV[2])
  if ARGV[9] ~= '' then
    redis.call('SADD', KEYS[4], ARGV[2])
    redis.call('SADD', KEYS[5], ARGV[9])
  end
  if ARGV[10] ~= '' then
    redis.call('HSET', KEYS[8], ARGV[2], ARGV[10])
  else
    redis.call('HDEL', KEYS[8], ARGV[2])
  end
elseif ending then
  redis.call('SREM', KEYS[3], ARGV[2])
  if old_owner ~= '' then redis.call('SREM', old_owner_set, ARGV[2]) end
  if ARGV[9] ~= '' then redis.call('SREM', KEYS[4], ARGV[2]) end
  redis.call('HDEL', KEYS[8], ARGV[2])
  redis.call('PUBLISH', ARGV[7], ARGV[2])
end
"""
    + _APPEND_EVENT
)

# KEYS: audit stream, question stream, record, chain head; ARGV: keep (ms), the event and
# its chain. An event that goes with no write of its record: appended to both streams, the
# question's stream living as long as the record (``_trail_follows``).
APPEND: Final = f"""{_chain_ready(2, "KEYS[1]", "KEYS[2]", "KEYS[4]")}
{_chain_append("KEYS[1]", "KEYS[2]", "KEYS[4]")}
{_trail_follows("KEYS[3]", "KEYS[2]", "ARGV[1]")}
return 1
"""

# KEYS: audit stream, purged hashes; ARGV: record key prefix, first id ('-' or '(' and the
# last one seen), last id (inclusive), count. One page of the audit stream's purge: deletes
# each entry whose question has no record left (or that names none), leaving its chain
# position's time and hash behind (``audit_trail.verify``); an entry of a pending question,
# or of one ended less than the retention ago, stays. Returns {entries read, deleted,
# the last id read ('' for none)}.
PURGE_AUDIT: Final = """
local entries = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[3], 'COUNT', ARGV[4])
local gone = 0
for _, entry in ipairs(entries) do
  local fields, request, at, chain = entry[2], nil, 0, {}
  for i = 1, #fields, 2 do chain[fields[i]] = fields[i + 1] end
  local ok, event = pcall(cjson.decode, chain['e'] or '')
  if ok and type(event) == 'table' then
    request = event['requestId']
    if type(event['at']) == 'number' then at = event['at'] end
  end
  if type(request) ~= 'string' or redis.call('EXISTS', ARGV[1] .. request) == 0 then
    redis.call('XDEL', KEYS[1], entry[1])
    if chain['n'] and chain['h'] then
      redis.call('HSET', KEYS[2], chain['n'], string.format('%.17g', at) .. ' ' .. chain['h'])
    end
    gone = gone + 1
  end
end
local last = ''
if #entries > 0 then last = entries[#entries][1] end
return {#entries, gone, last}
"""

# KEYS: open set; ARGV: record key prefix, question stream prefix. Lifts any TTL off the
# stream of each pending question (a record without TTL): the bot before this layout gave
# every question's stream one at each event, pending or not.
KEEP_OPEN_TRAILS: Final = """
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if redis.call('PTTL', ARGV[1] .. id) == -1 then redis.call('PERSIST', ARGV[2] .. id) end
end
return 1
"""

# KEYS: an index set; ARGV: record key prefix. Returns the JSON of every member still
# stored and drops the ids whose record has expired.
INDEXED: Final = """
local out = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local raw = redis.call('GET', ARGV[1] .. id)
  if raw then out[#out + 1] = raw else redis.call('SREM', KEYS[1], id) end
end
return out
"""

# KEYS: open set, owners set, this process's owner set; ARGV: owner set prefix, record key
# prefix. Returns {pending, this process's, owned by none}, reading no record: an id whose
# record is gone (Redis lost it) is dropped from the index sets, as INDEXED drops it.
OPEN_COUNT: Final = """
local owners = redis.call('SMEMBERS', KEYS[2])
local total = 0
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if redis.call('EXISTS', ARGV[2] .. id) == 1 then
    total = total + 1
  else
    redis.call('SREM', KEYS[1], id)
    for _, pid in ipairs(owners) do redis.call('SREM', ARGV[1] .. pid, id) end
  end
end
local owned = 0
for _, pid in ipairs(owners) do owned = owned + redis.call('SCARD', ARGV[1] .. pid) end
return {total, redis.call('SCARD', KEYS[3]), math.max(0, total - owned)}
"""

# KEYS: open set, audiences hash; ARGV: record key prefix. Returns {known, {id, ...}}:
# ``known`` is one string, a line "id<TAB>audience" per open record the hash knows (one
# reply to parse, not two per record), then the open ids it does not (records stored before
# it was kept). Drops the entries of ids no longer open or whose record Redis lost (the
# open set itself is cleaned by INDEXED and OPEN_COUNT).
AUDIENCES: Final = """
local known = {}
local entries = redis.call('HGETALL', KEYS[2])
for i = 1, #entries, 2 do known[entries[i]] = entries[i + 1] end
local found, missing = {}, {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if redis.call('EXISTS', ARGV[1] .. id) == 1 then
    local audience = known[id]
    if audience then
      found[#found + 1] = id .. '\\t' .. audience
      known[id] = nil
    else
      missing[#missing + 1] = id
    end
  end
end
for id, _ in pairs(known) do redis.call('HDEL', KEYS[2], id) end
return {table.concat(found, '\\n'), missing}
"""

# KEYS: owners set, owner set; ARGV: owner. Forget an owner with nothing left to sweep.
FORGET_OWNER: Final = """
if redis.call('SCARD', KEYS[2]) == 0 then redis.call('SREM', KEYS[1], ARGV[1]) end
return 1
"""
