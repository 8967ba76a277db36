--[[
  Applies a batch of one shard's stream records to the materialised reads (the stream worker,
  src/jobs/stream-worker.ts): the daily buckets of each user's metrics and points systems
  (src/domain/buckets.ts).

  Idempotent and in order. A per-shard watermark (the last stream id applied, per consumer
  group) advances in the same call as the effects, so:
    - an entry at or below the watermark is skipped (a redelivery, or a crash between this
      call and XACK, never counts twice);
    - an entry is applied only if it is the next entry of the stream after the watermark. A
      batch stops at a gap (an earlier entry is still pending with another consumer): its
      entries stay unacknowledged and are retried, so no entry is ever skipped either.

  Steps
    1. HGET the watermark; XRANGE the entries after it (as many as the batch holds).
    2. For each entry of the batch, in stream order: skip, apply, or stop at a gap.
       A series' latest month is read once (ZREVRANGE 0 0 WITHSCORES) and kept in a table.
       A record whose local day is before the latest bucket's is counted in the latest bucket
       (days only move forward in a series; src/domain/buckets.ts says why).
    3. Per touched series: ZREM the latest month as read, ZADD every new or changed month.
       HSET the new watermark.

  Bucket layout (src/domain/buckets.ts): zset {t:s}:b:<series>:<user>, one member per month
  (score = monthly period), member "day:count:change:total;..." with the days ascending.

  KEYS[1] shard stream       {t:s}:x
  KEYS[2] shard watermarks   {t:s}:xw   (hash: group → last applied id)

  ARGV[1] key prefix {t:s}:
  ARGV[2] consumer group
  ARGV[3] n, the number of entries
  ARGV[4 ..] n entries, ascending by id, each: id, user id, the month of its local day (decimal
          text: it is only compared and written back as a score), the numbers (little-endian
          doubles, struct '<dd' then k × '<ddd': local day, k, then per op change, total after
          (NaN = previous total + change), count), then the k ops' series ("m:<metric>" |
          "p:<system>"). Numbers travel as doubles and months as text because Lua turns text
          into a number with strtod and a number into text with a printf, ~2-4k instructions
          each (callgrind: bench/README.md, "Instructions per event script").

  Reply {applied, skipped, watermark | false}; entries at or below the watermark may be acked.
]]
-- @include "stream/ids.lua"
--@body
local rcall = redis.call
local stream, wmKey = KEYS[1], KEYS[2]
local prefix, group, n = ARGV[1], ARGV[2], tonumber(ARGV[3])

local wm = rcall('HGET', wmKey, group)
local following
if wm then following = rcall('XRANGE', stream, '(' .. wm, '+', 'COUNT', n) else following = rcall('XRANGE', stream, '-', '+', 'COUNT', n) end

-- key → {orig = member as read | nil, month, head = the month's earlier days (string),
--        cur = {day, count, change, total} the latest day, done = {{month, member}...}}
local series, touched = {}, {}

local function fmt(b)
  return string.format('%d:%d:%d:%d', b[1], b[2], b[3], b[4])
end

local function bucketOf(key)
  local b = series[key]
  if b then return b end
  b = { done = {}, head = '' }
  local latest = rcall('ZREVRANGE', key, 0, 0, 'WITHSCORES')
  if latest[1] then
    b.orig, b.month = latest[1], latest[2]
    local head, last = string.match(latest[1], '^(.*);([^;]+)$')
    if not head then head, last = '', latest[1] end
    local d, c, ch, t = string.match(last, '^(-?%d+):(%d+):(-?%d+):(-?%d+)$')
    b.head = head
    b.cur = { tonumber(d), tonumber(c), tonumber(ch), tonumber(t) }
  end
  series[key] = b
  touched[#touched + 1] = key
  return b
end

local function member(b)
  if b.head == '' then return fmt(b.cur) end
  return b.head .. ';' .. fmt(b.cur)
end

local function add(key, day, month, count, change, total)
  local b = bucketOf(key)
  local cur = b.cur
  if cur and day <= cur[1] then
    cur[2] = cur[2] + count
    cur[3] = cur[3] + change
    cur[4] = total or (cur[4] + change)
    return
  end
  local after = total or ((cur and cur[4] or 0) + change)
  if cur and month == b.month then
    b.head = member(b)
  else
    if cur then b.done[#b.done + 1] = { b.month, member(b) } end
    b.head, b.month = '', month
  end
  b.cur = { day, count, change, after }
end

local applied, skipped = 0, 0
local nextAt = 1
local i = 4
for _ = 1, n do
  local id, user, month, numbers = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local day, k, at = struct.unpack('<dd', numbers)
  local names = i + 4
  i = names + k
  -- The next entry of the stream (the common case) needs no id comparison, which is costly in
  -- Lua (~5 µs an entry measured); only an entry that is not tells a skip from a gap.
  if following[nextAt] and following[nextAt][1] == id then
    nextAt = nextAt + 1
    for o = names, names + k - 1 do
      local change, total, count
      change, total, count, at = struct.unpack('<ddd', numbers, at)
      if total ~= total then total = nil end -- NaN: no total in the record
      add(prefix .. 'b:' .. ARGV[o] .. ':' .. user, day, month, count, change, total)
    end
    wm = id
    applied = applied + 1
  elseif wm and idCompare(id, wm) <= 0 then
    skipped = skipped + 1
  else
    break
  end
end

for _, key in ipairs(touched) do
  local b = series[key]
  if b.orig then rcall('ZREM', key, b.orig) end
  local args = {}
  for _, d in ipairs(b.done) do
    args[#args + 1] = d[1]
    args[#args + 1] = d[2]
  end
  args[#args + 1] = b.month
  args[#args + 1] = member(b)
  rcall('ZADD', key, unpack(args))
end
if applied > 0 then rcall('HSET', wmKey, group, wm) end
return { applied, skipped, wm or false }
