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
       parts "p:<sys>:<added>:<total>:..."), its day; collected, or stop for days.
    3. ONE HMGET of the open months ({t:s}:bl) of every series the batch changes; then the
       changes in order, on those open months (src/domain/buckets.ts applyChange is the
       reference). A change on the open day (or before it: days only move forward in a series,
       src/domain/buckets.ts says why) is added to it. A later day of the open day's month
       closes the open day by appending it to the value's closed days: no zset call. A later
       month closes the month: its days (closed and open) are appended to the month's member in
       the zset (its latest member read once per series with ZREVRANGE 0 0 WITHSCORES: a member
       of the closing month may exist, left by an earlier version), so the month members are
       read and rewritten once per user, series and month. Then the new day opens.
       A series without an open month (new, or last written by a version that kept the latest
       day in the zset) reads its latest month member once and moves that member's last day out
       of the zset into the open day: existing data migrates as it is written to, never counted
       twice. A value of the open day alone (28 bytes, the version before the open month) is an
       open month with no closed days: nothing to migrate.
       Every command that can fail (a read) runs before the first write.
       Then the writes: per series whose month members changed, ZREM the latest month as read
       (when it changed) and ZADD every new or changed month; ONE HSET of the open months.
       HSET the new watermark.
    4. The consumer group `group` is kept at the watermark (XGROUP SETID, with its entries-read
       so that Redis still reports its lag), so the stream's trimming and GET /metrics read this
       worker's position as they read every group's; entries left pending in it by a worker of an
       earlier version are acknowledged (the watermark, not the group, says what is applied).
       Then the stream is trimmed below what every group has finished (stream/trim.lua).

  Bucket layout (src/domain/buckets.ts): the open month of each series (its open day, the latest,
  and the days of that month closed before it) in the hash {t:s}:bl, field "<series>:<user>"
  (lua/buckets/open-day.lua); the days before them in the zset {t:s}:b:<series>:<user>, one
  member per month (score = monthly period), member "day:count:change:total;..." with the days
  ascending.

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
-- @include "buckets/open-day.lua"

-- The event script's detail, "metric|value|eventId|day|month|total".
local EVENT_DETAIL = '^([^|]*)|([^|]*)|[^|]*|([^|]*)|([^|]*)|([^|]*)$'
-- One points part of an outcome: system, added, total after. Searched in the outcome with a ';'
-- put before it, so that it matches only at the start of a part: inside another part ("b:top-xp:
-- <run>::<value>", a board whose key ends in p) 'p:' is no points part.
local POINTS_PART = ';p:([^:;]*):([^:;]*):([^:;]*)'

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

-- The string.format of a month member of n days, "day:count:change:total;..." (made once per n
-- and library). One call for a month's days: a call per day cost ~7.1k instructions a day, one
-- call ~4.8k (callgrind, 20 days).
local MONTH_FORMATS = {}

local function monthFormat(n)
  local f = MONTH_FORMATS[n]
  if not f then
    f = string.rep('%d:%d:%d:%d;', n - 1) .. '%d:%d:%d:%d'
    MONTH_FORMATS[n] = f
  end
  return f
end

-- redis.call(cmd, key, list[1..n]) in calls of at most 1000 list items (unpack is bounded by
-- Lua's C stack; a batch holds far fewer); the replies' tables concatenated.
local function callChunked(cmd, key, list, n)
  local out = {}
  for s = 1, n, 1000 do
    local part = redis.call(cmd, key, unpack(list, s, math.min(s + 999, n)))
    if type(part) == 'table' then
      for i = 1, #part do out[s + i - 1] = part[i] end
    end
  end
  return out
end
--@body
local rcall = redis.call
-- (The libraries are not reachable while a Function library loads: bound here, per call.)
local smatch, sfind = string.match, string.find
local spack, sunpack, ssub = struct.pack, struct.unpack, string.sub
local stream, wmKey = KEYS[1], KEYS[2]
local prefix, group, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
local openKey = prefix .. 'bl'

local hints = {}
for h = 4, #ARGV, 3 do hints[ARGV[h]] = h end

local wm = rcall('HGET', wmKey, group)
local oldWm = wm
local records
-- (Arguments to redis.call as text: Redis prints a number with %.17g, ~3.7k instructions.)
if wm then records = rcall('XRANGE', stream, '(' .. wm, '+', 'COUNT', ARGV[3]) else records = rcall('XRANGE', stream, '-', '+', 'COUNT', ARGV[3]) end

-- 2. The changes, as parallel arrays (a table per change or per series costs ~2-4k instructions).
-- Per change, in record order: its series (index), day, month, change, total after (false: not
-- in the record).
local cSeries, cDay, cMonth, cChange, cTotal, nc = {}, {}, {}, {}, {}, 0
-- Per series, in first-seen order: field "<series>:<user>", its open day (sDay false: none), the
-- closed days of its month (sClosed: packed, as the value keeps them after the open day; nil:
-- none) and its zset once read (sMonths, step 3); index: field → series.
local sField, sDay, sMonth, sCount, sChange, sTotal, sClosed, sMonths = {}, {}, {}, {}, {}, {}, {}, {}
local index, ns = {}, 0
-- Decimal text → number for days and months, which repeat across a batch (tonumber ~1.8k each).
local numbers = {}

local function num(text)
  local v = numbers[text]
  if not v then
    v = tonumber(text)
    numbers[text] = v
  end
  return v
end

local function change(field, day, month, delta, total)
  local i = index[field]
  if not i then
    ns = ns + 1
    i = ns
    index[field] = i
    sField[i] = field
  end
  nc = nc + 1
  cSeries[nc], cDay[nc], cMonth[nc], cChange[nc], cTotal[nc] = i, day, month, delta, total
end

local applied, stopAt = 0, nil
for r = 1, #records do
  local kind, user, _, _, detail, outcome = fieldsOf(records[r][2])
  local metric, value, total, day, month
  if kind == 'ev' and detail then
    metric, value, day, month, total = smatch(detail, EVENT_DETAIL)
    if not metric then
      -- Written before records carried the day: "metric|value|eventId|total", or without the total.
      metric, value, total = smatch(detail, '^([^|]*)|([^|]*)|[^|]*|([^|]*)$')
      if not metric then metric, value = smatch(detail, '^([^|]*)|([^|]*)') end
    end
  end
  local p, e, sys, added, after
  local parts = outcome and (';' .. outcome)
  if parts then p, e, sys, added, after = sfind(parts, POINTS_PART) end
  if metric or p then
    if not day then
      local h = hints[records[r][1]]
      if not h then
        stopAt = r
        break
      end
      day, month = ARGV[h + 1], ARGV[h + 2]
    end
    day, month = num(day), num(month)
    if metric then change('m:' .. metric .. ':' .. user, day, month, tonumber(value), total and tonumber(total) or false) end
    while p do
      change('p:' .. sys .. ':' .. user, day, month, tonumber(added), tonumber(after))
      p, e, sys, added, after = sfind(parts, POINTS_PART, e + 1)
    end
  end
  wm = records[r][1]
  applied = applied + 1
end

-- 3. The open months (sDay..., sClosed). A series' zset, once read (sMonths[i]): key, orig = the
-- latest member as read (or nil), month = the working member's month (its score as text, as
-- Redis replies it: an integer's digits), body = the working member ('': none), fresh = body
-- differs from what Redis holds, rm = orig must go, done = finished members {month, member, ...}.
local touched = {}
-- Month number → its text (a score for ZADD: a number argument costs Redis a %.17g).
local monthTexts = {}

local function monthText(m)
  local text = monthTexts[m]
  if not text then
    text = string.format('%d', m)
    monthTexts[m] = text
  end
  return text
end

local function monthsOf(i)
  local z = sMonths[i]
  if z then return z end
  local key = prefix .. 'b:' .. sField[i]
  local latest = rcall('ZREVRANGE', key, '0', '0', 'WITHSCORES')
  z = { key = key, orig = latest[1], month = latest[2], body = latest[1] or '', fresh = false, rm = false }
  sMonths[i] = z
  touched[#touched + 1] = z
  return z
end

-- A series without an open month: a series kept by an earlier version moves its latest day out
-- of the zset into the open day; a new one has none (sDay false).
local function migrate(i)
  local z = monthsOf(i)
  if not z.orig then
    sDay[i] = false
    return
  end
  local head, last = smatch(z.body, '^(.*);([^;]+)$')
  if not head then head, last = '', z.body end
  local d, c, ch, t = smatch(last, '^(-?%d+):(%d+):(-?%d+):(-?%d+)$')
  z.body, z.fresh, z.rm = head, head ~= '', true
  sDay[i], sMonth[i], sCount[i], sChange[i], sTotal[i] = tonumber(d), tonumber(z.month), tonumber(c), tonumber(ch), tonumber(t)
end

-- A later day of the same month: series i's open day joins the month's closed days, in the hash.
local function closeDay(i)
  sClosed[i] = (sClosed[i] or '') .. spack(CLOSED_DAY, sDay[i], sCount[i], sChange[i], sTotal[i])
end

-- The month's days as its member lists them: the closed days, then the open day.
local function monthDaysText(i)
  local flat = closedDays(sClosed[i] or '', 1)
  local n = #flat
  flat[n + 1], flat[n + 2], flat[n + 3], flat[n + 4] = sDay[i], sCount[i], sChange[i], sTotal[i]
  return string.format(monthFormat(n / 4 + 1), unpack(flat))
end

-- A later month: series i's month (closed days and open day) goes to its member in the zset.
-- The latest member is of that month when an earlier version closed the month's first days
-- into it (or migrate left the rest of it): appended to, so that a month keeps one member.
local function closeMonth(i)
  local z = monthsOf(i)
  local text = monthDaysText(i)
  local month = monthText(sMonth[i])
  sClosed[i] = nil
  if z.body ~= '' and z.month == month then
    if not z.fresh then z.rm = true end
    z.body, z.fresh = z.body .. ';' .. text, true
  else
    if z.fresh then
      z.done = z.done or {}
      z.done[#z.done + 1] = z.month
      z.done[#z.done + 1] = z.body
    end
    z.month, z.body, z.fresh = month, text, true
  end
end

if ns > 0 then
  local packed = callChunked('HMGET', openKey, sField, ns)
  for i = 1, ns do
    local v = packed[i]
    if v then
      sDay[i], sMonth[i], sCount[i], sChange[i], sTotal[i] = sunpack(OPEN_DAY, v)
      if #v > OPEN_DAY_BYTES then sClosed[i] = ssub(v, OPEN_DAY_BYTES + 1) end
    else
      migrate(i)
    end
  end
end

for k = 1, nc do
  local i, day, delta, total = cSeries[k], cDay[k], cChange[k], cTotal[k]
  local open = sDay[i]
  if open and day <= open then
    sCount[i] = sCount[i] + 1
    sChange[i] = sChange[i] + delta
    sTotal[i] = total or (sTotal[i] + delta)
  else
    local after, month = total or ((open and sTotal[i] or 0) + delta), cMonth[k]
    if open then
      if month == sMonth[i] then closeDay(i) else closeMonth(i) end
    end
    sDay[i], sMonth[i], sCount[i], sChange[i], sTotal[i] = day, month, 1, delta, after
  end
end

-- 3. The writes (every read that could fail is done).
for t = 1, #touched do
  local z = touched[t]
  if z.rm then rcall('ZREM', z.key, z.orig) end
  local args = z.done or {}
  if z.fresh then
    args[#args + 1] = z.month
    args[#args + 1] = z.body
  end
  if #args > 0 then rcall('ZADD', z.key, unpack(args)) end
end
if ns > 0 then
  local hashArgs = { OPEN_DAYS_TABLE[1], OPEN_DAYS_TABLE[2] }
  for i = 1, ns do
    hashArgs[2 * i + 1] = sField[i]
    local value = spack(OPEN_DAY, sDay[i], sMonth[i], sCount[i], sChange[i], sTotal[i])
    -- (The common value is the open day alone: no concatenation then.)
    if sClosed[i] then value = value .. sClosed[i] end
    hashArgs[2 * i + 2] = value
  end
  callChunked('HSET', openKey, hashArgs, 2 * ns + 2)
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
    if not hints[id] and (kind == 'ev' or string.find(';' .. (outcome or ''), ';p:', 1, true)) then
      reply[#reply + 1] = id
      reply[#reply + 1] = ms
      reply[#reply + 1] = zone or 'UTC'
    end
  end
end
return reply
