--[[
  Applies the next records of one shard stream to the materialised reads (the stream worker,
  src/jobs/stream-worker.ts): the daily buckets of each user's metrics and points systems
  (src/domain/buckets.ts). The script reads the records itself, from its watermark on: Node
  sends no record and parses none (reading each record into Node and sending its numbers back
  cost the service's process ~27 µs a record, a third of an event; bench/README.md).

  Exactly once and in order, without a consumer group's bookkeeping: the watermark (the last
  stream id applied) is read, the records after it are applied, and the watermark moves, in ONE
  atomic call. Two workers calling at once are serialised by Redis: the second starts where the
  first stopped. A crash between two calls loses nothing (nothing is held by a consumer).

  The local day of a record: Lua has no zone data (DESIGN: Time), so the writer puts it in the
  record when it knows it. The event script's record carries it (Node computed it for the
  streak): its detail is "metric|value|eventId|day|month|total". The others (time triggers,
  achievements completed by API, identification; and event records written before this
  version) do not: the script stops at the first such record that changes a series and replies
  the ids, times and zones of those in the batch, and Node calls again with their days (ARGV
  from 4). Records that change no series (a boost's record, an identification without points)
  need no day and only move the watermark.

  Steps
    1. HGET the watermark; XRANGE the next n records after it.
    2. Per record in order: its series changes (metric from the detail, points from the outcome
       parts "p:<sys>:<added>:<total>:..."), its day; apply, or stop for days.
       A series' latest month is read once (ZREVRANGE 0 0 WITHSCORES) and kept in a table.
       A record whose local day is before the latest bucket's is counted in the latest bucket
       (days only move forward in a series; src/domain/buckets.ts says why).
    3. Per touched series: ZREM the latest month as read, ZADD every new or changed month.
       HSET the new watermark.
    4. The consumer group `group` is kept at the watermark (XGROUP SETID, with its entries-read
       so that Redis still reports its lag), so the stream's trimming and GET /metrics read this
       worker's position as they read every group's; entries left pending in it by a worker of an
       earlier version are acknowledged (the watermark, not the group, says what is applied).
       Then the stream is trimmed below what every group has finished (stream/trim.lua).

  Bucket layout (src/domain/buckets.ts): zset {t:s}:b:<series>:<user>, one member per month
  (score = monthly period), member "day:count:change:total;..." with the days ascending.

  KEYS[1] shard stream       {t:s}:x
  KEYS[2] shard watermarks   {t:s}:xw   (hash: group → last applied id)

  ARGV[1] key prefix {t:s}:
  ARGV[2] the group (its name is the watermark's field)
  ARGV[3] n, the most records to apply in this call
  ARGV[4 ..] days Node computed: per record id, its local day and that day's monthly period
          (decimal text; src/domain/periods.ts)

  Reply {applied, watermark | false, full 0/1 (n records were read: more may follow),
         then per record that needs its day: id, ms, zone}
]]
-- @include "stream/ids.lua"
-- @include "stream/trim.lua"
--@body
local rcall = redis.call
local stream, wmKey = KEYS[1], KEYS[2]
local prefix, group, n = ARGV[1], ARGV[2], tonumber(ARGV[3])

local hints = {}
for h = 4, #ARGV, 3 do hints[ARGV[h]] = h end

local wm = rcall('HGET', wmKey, group)
local oldWm = wm
local records
if wm then records = rcall('XRANGE', stream, '(' .. wm, '+', 'COUNT', n) else records = rcall('XRANGE', stream, '-', '+', 'COUNT', n) end

-- key → {orig = member as read | nil, month, head = the month's earlier days (string),
--        cur = {day, count, change, total} the latest day, done = {{month, member}...} | nil}
local series, touched = {}, {}

local function fmt(b)
  return string.format('%d:%d:%d:%d', b[1], b[2], b[3], b[4])
end

local function bucketOf(key)
  local b = series[key]
  if b then return b end
  b = { head = '' }
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

-- total nil: the record did not carry the total after it; the running total + change.
local function add(key, day, month, change, total)
  local b = bucketOf(key)
  local cur = b.cur
  if cur and day <= cur[1] then
    cur[2] = cur[2] + 1
    cur[3] = cur[3] + change
    cur[4] = total or (cur[4] + change)
    return
  end
  local after = total or ((cur and cur[4] or 0) + change)
  if cur and month == b.month then
    b.head = member(b)
  else
    if cur then
      b.done = b.done or {}
      b.done[#b.done + 1] = { b.month, member(b) }
    end
    b.head, b.month = '', month
  end
  b.cur = { day, 1, change, after }
end

-- A record's fields by name. Every writer XADDs k, u, t, z, e, o in this order, so they are
-- read by position when the names are where they should be (a table per record costs ~4k
-- instructions); by name otherwise.
local function fieldsOf(flat)
  if flat[11] == 'o' and flat[9] == 'e' and flat[3] == 'u' and flat[1] == 'k' then
    return flat[2], flat[4], flat[6], flat[8], flat[10], flat[12]
  end
  local f = {}
  for j = 1, #flat, 2 do f[flat[j]] = flat[j + 1] end
  return f.k, f.u, f.t, f.z, f.e, f.o
end

local applied, stopAt = 0, nil
for r = 1, #records do
  local kind, user, _, _, detail, outcome = fieldsOf(records[r][2])
  outcome = outcome or ''
  local metric, value, total, day, month
  if kind == 'ev' then
    detail = detail or ''
    metric, value, day, month, total = string.match(detail, '^([^|]*)|([^|]*)|[^|]*|([^|]*)|([^|]*)|([^|]*)$')
    if not metric then
      -- Written before records carried the day: "metric|value|eventId|total", or without the total.
      metric, value, total = string.match(detail, '^([^|]*)|([^|]*)|[^|]*|([^|]*)$')
      if not metric then metric, value = string.match(detail, '^([^|]*)|([^|]*)') end
    end
  end
  local hasPoints = string.find(outcome, 'p:', 1, true)
  if metric or hasPoints then
    if not day then
      local h = hints[records[r][1]]
      if not h then
        stopAt = r
        break
      end
      day, month = ARGV[h + 1], ARGV[h + 2]
    end
    day = tonumber(day)
    if metric then add(prefix .. 'b:m:' .. metric .. ':' .. user, day, month, tonumber(value), total and tonumber(total)) end
    if hasPoints then
      for sys, added, after in string.gmatch(outcome, 'p:([^:;]*):([^:;]*):([^:;]*)') do
        add(prefix .. 'b:p:' .. sys .. ':' .. user, day, month, tonumber(added), tonumber(after))
      end
    end
  end
  wm = records[r][1]
  applied = applied + 1
end

for t = 1, #touched do
  local key = touched[t]
  local b = series[key]
  if b.orig then rcall('ZREM', key, b.orig) end
  if b.done then
    local args = {}
    for d = 1, #b.done do
      args[#args + 1] = b.done[d][1]
      args[#args + 1] = b.done[d][2]
    end
    args[#args + 1] = b.month
    args[#args + 1] = member(b)
    rcall('ZADD', key, unpack(args))
  else
    rcall('ZADD', key, b.month, member(b))
  end
end

if applied > 0 then
  rcall('HSET', wmKey, group, wm)
  -- 4. The group follows the watermark (after it, the trim sees it at the watermark too).
  local found = false
  for _, info in ipairs(rcall('XINFO', 'GROUPS', stream)) do
    local g = {}
    for k = 1, #info, 2 do g[info[k]] = info[k + 1] end
    if g['name'] == group then
      found = true
      local pending = g['pending']
      while pending > 0 do
        local held = rcall('XPENDING', stream, group, '-', '+', 1000)
        local ids = {}
        for p = 1, #held do ids[p] = held[p][1] end
        rcall('XACK', stream, group, unpack(ids))
        pending = pending - #held
      end
      -- Redis counts the group's lag from its entries-read; kept exact while the group was at the
      -- old watermark (always, but for a group an earlier version's workers moved).
      local read = g['entries-read']
      if read and g['last-delivered-id'] == (oldWm or '0-0') then
        rcall('XGROUP', 'SETID', stream, group, wm, 'ENTRIESREAD', read + applied)
      else
        rcall('XGROUP', 'SETID', stream, group, wm)
      end
    end
  end
  -- A Redis that lost its groups (restarted without its data) gets it back here.
  if not found then rcall('XGROUP', 'CREATE', stream, group, wm) end
  trimStream(stream, wm)
end

local reply = { applied, wm or false, (#records == n) and 1 or 0 }
if stopAt then
  for r = stopAt, #records do
    local id = records[r][1]
    local kind, _, ms, zone, _, outcome = fieldsOf(records[r][2])
    if not hints[id] and (kind == 'ev' or string.find(outcome or '', 'p:', 1, true)) then
      reply[#reply + 1] = id
      reply[#reply + 1] = ms
      reply[#reply + 1] = zone or 'UTC'
    end
  end
end
return reply
