--[[
  Records one metric event for one user, atomically: the whole event path of Laurel in one
  EVALSHA on the user's shard (DESIGN: "The hot path: one Redis round trip per event").

  The loader replaces --@rules with `local R = {...}`: the tenant's rules narrowed to what an
  event on this metric can reach (src/store/rules.ts). Everything above --@body is the library
  part (built once when loaded as a Redis Function); below it is the call.

  Steps
    1. HMGET the user's state (`s`, msgpack), the idempotency field and the profile fields.
    2. Zone check: without a zone in the event, Node computed the calendar for the zone it
       assumed; if the stored zone differs, reply -1 so Node recomputes and calls again.
    3. Idempotency (spec: idempotency rules 1-6): a key already used by this user on this
       metric replies 2 with the current state and writes nothing.
    4. Range check of the new metric total: reply -2 and write nothing when out of range.
    5. Upsert the user; first identification fires user_creation triggers, schedules time
       triggers and grants the initial freezes.
    6. Metric total; metric triggers on newly crossed multiples above each trigger's
       high-water mark (event and user attribute filters); streak settlement (freezes) and
       extension (streak triggers, streak achievements); metric achievements (achievement
       triggers, composites).
    7. Writes: one HSET of the state hash, shard counters, points zsets, award lists, streak
       zsets, and one XADD of the event's record to the shard stream.

  KEYS[1] user state hash   {t:s}:u:<userId>
  KEYS[2] shard counters    {t:s}:agg
  KEYS[3] shard stream      {t:s}:x, and the hook stream {t:s}:xh (includes/hooks.lua)

  ARGV[1]  key prefix {t:s}:   (the shard's other keys are built from it)
  ARGV[2]  user id
  ARGV[3]  the numbers, 8 little-endian doubles (struct '<dddddddd'): now (ms since epoch,
           the service clock), value in micro-units, current streak period index and current
           local day index in the zone Node computed the calendar for, the instant (ms) the
           streak is lost if extended in the current period, and if last covered in the
           previous period, r (profile fields to read), n (profile fields sent). Binary because
           `tonumber` of a decimal string costs ~1.8k instructions (strtod); struct.unpack reads
           all eight for less than one. The price is in Node: ioredis serialises a command with
           a Buffer argument in its slower buffer mode, ~3-4 µs more; Redis time is the scarcer
           (bench/README.md, "Instructions per event script").
  ARGV[4]  event id (uuid) for a new event
  ARGV[5]  idempotency field "i:<metric>:<key>", or '' without a key
  ARGV[6]  zone sent with the event, or ''
  ARGV[7]  zone Node computed the calendar for
  ARGV[8]  stream record detail "metric|value|eventId|day|month" (the local day and its monthly
           period, for the stream worker's daily buckets); the script appends "|total"
  ARGV[9]  event-attribute mask: one '1'/'0' per metric trigger of R.mt (computed in Node)
  ARGV[10] each board of R.lb: "run:threshold", or "-" when scheduled or finished
  ARGV[11 .. 10+r] the names of the profile fields to read (tz, the declared ua:<attr>, those sent)
  ARGV[11+r .. 10+r+2n] profile field, value pairs sent (em, nm, tz, se, dt, ua:<attr>)

  Reply: ONE flat array. Redis converts a Lua table to RESP with ~7 field lookups per table
  (err, ok, double, map...), so nested tables cost ~5k instructions each; counts announce the
  variable-length parts instead.
    {-1, storedZone}      the zone assumption was wrong; nothing written
    {-2}                  the metric total would leave ±maxTotal; nothing written
    {2, eventId, total, 0, streak...}                 replay of an idempotency key; nothing written
    {1, eventId, total, created 0/1, streak..., #achievements, key..., #points, points...,
     #boards, boards...}
      streak   = length, startPeriod|false, lastPeriod|false, extended 0/1, freezes|false,
                 grants|false, createdDay|false (7 values)
      key      = an achievement completed by this request, in completion order
      points   = per system changed: systemKey, added, total, before, #awards, award...
      award    = "seq|ms|awarded|totalAfter|triggerKey"
      boards   = per entry moved (8 values): boardKey, run, oldValue|false, newValue, breakdown,
                 rank|false, previousRank|false, threshold
]]
--@rules
-- @include "includes/context.lua"
-- @include "includes/math.lua"
-- @include "includes/state.lua"
-- @include "includes/points.lua"
-- @include "includes/achievements.lua"
-- @include "includes/user.lua"
-- @include "includes/streak.lua"
-- @include "includes/leaderboards.lua"
-- @include "includes/hooks.lua"
--@body
local nowMs, value, nowPeriod, nowDay, lostIfExtended, lostIfPrevious, nRead, nProfile = struct.unpack('<dddddddd', ARGV[3])
beginCall(nowMs, ARGV[1], ARGV[2])
local userKey, aggKey, streamKey = KEYS[1], KEYS[2], KEYS[3]
local eventId, idemField = ARGV[4], ARGV[5]
local tzSent, tzAssumed = ARGV[6], ARGV[7]
local recordDetail = ARGV[8]
local deadlines = { lostIfExtended, lostIfPrevious }
local eventMask = ARGV[9]
local boards = parseBoards(ARGV[10])

-- 1. Read.
local original = loadState(userKey, idemField ~= '' and idemField or 's', { unpack(ARGV, 11, 10 + nRead) })

-- The reply's head: status, event id, metric total, created, then the stored streak (readers
-- settle it; replays are answered without settling: no writes).
local function replyHead(status, id, total, created, extended)
  return { status, id, total, created and 1 or 0, num('sl') or 0, num('ss') or false, num('sp') or false, extended and 1 or 0, num('fz') or false, num('fg') or false, num('cd') or false }
end

-- 2. Zone.
if tzSent == '' and (U.tz or 'UTC') ~= tzAssumed then return { -1, U.tz or 'UTC' } end

local oldTotal = num(R.mf) or 0

-- 3. Replay.
if idemField ~= '' and original then
  return replyHead(2, original, oldTotal, false, false)
end

-- 4. Range.
local newTotal = oldTotal + value
if newTotal > R.maxTotal or newTotal < -R.maxTotal then return { -2 } end

-- The key is stored with the event it first recorded (spec: idempotency rule 3).
local extraWrites = {}
if idemField ~= '' then extraWrites = { idemField, eventId } end

-- 5. User.
local created = not S.ct
local profileChanged = applyProfile(ARGV, 11 + nRead, nProfile)
if created then
  createUser(nowDay)
elseif profileChanged then
  set('up', now)
end

-- 6a. Metric total and metric triggers. A trigger with filters counts only the values of
-- events that pass them (its own running sum, t.tc); an unfiltered one counts the metric total.
set(R.mf, newTotal)
local metricTriggers = R.mt
for i = 1, #metricTriggers do
  local t = metricTriggers[i]
  if string.byte(eventMask, i) == 49 and matches(t.f) then
    local counted = newTotal
    if t.tc then
      counted = (num(t.tc) or 0) + value
      set(t.tc, counted)
    end
    local hw = num(t.hw) or 0
    if counted > hw then
      set(t.hw, counted)
      local crossings = idiv(counted, t.th) - idiv(hw, t.th)
      if crossings > 0 then award(t.s, t.k, crossings * t.pts) end
    end
  end
end

-- 6b. Streak.
if not created then settleStreak(nowDay, nowPeriod) end
local extended = extendStreak(nowPeriod, value, deadlines)

-- 6c. Metric achievements of this metric.
local metricAchievements = R.mach
for i = 1, #metricAchievements do
  local key = metricAchievements[i]
  if newTotal >= R.ach[key].v then complete(key) end
end

-- 7. Writes.
local outParts = {}
if created then
  rcall('HINCRBY', aggKey, 'users', 1)
  outParts[#outParts + 1] = 'c'
end
flushAchievements(aggKey, outParts)
local streakChanged = (extended or streakOut.lost > 0) and (S.sl or 0) or nil
updateBoards(boards, value, streakChanged, outParts)
local pointsReply = flushPoints(aggKey, outParts)
streakOutcome(outParts, extended)
flushState(userKey, extraWrites)
appendRecord(streamKey, R.wh, 'ev', userId, now, U.tz or 'UTC', recordDetail .. string.format('|%d', newTotal), outParts)

-- Appended by index, not through a helper: a closure costs Lua ~1.6k instructions a call.
local reply = replyHead(1, eventId, newTotal, created, extended)
local n = #reply + 1
reply[n] = #completed
for i = 1, #completed do n = n + 1; reply[n] = completed[i] end
n = n + 1; reply[n] = #pointsReply
for i = 1, #pointsReply do
  local entry = pointsReply[i]
  for j = 1, 4 do n = n + 1; reply[n] = entry[j] end
  n = n + 1; reply[n] = #entry - 4
  for j = 5, #entry do n = n + 1; reply[n] = entry[j] end
end
n = n + 1; reply[n] = #boardOut
for i = 1, #boardOut do
  local entry = boardOut[i]
  for j = 1, 8 do n = n + 1; reply[n] = entry[j] end
end
return reply
