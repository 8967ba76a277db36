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
  KEYS[3] shard stream      {t:s}:x

  ARGV[1]  key prefix {t:s}:   (the shard's other keys are built from it)
  ARGV[2]  user id
  ARGV[3]  now, ms since epoch (the service clock)
  ARGV[4]  event id (uuid) for a new event
  ARGV[5]  idempotency field "i:<metric>:<key>", or '' without a key
  ARGV[6]  value in micro-units (integer)
  ARGV[7]  zone sent with the event, or ''
  ARGV[8]  zone Node computed the calendar for
  ARGV[9]  current streak period index in that zone
  ARGV[10] current local day index in that zone
  ARGV[11] stream record detail "metric|value|eventId"
  ARGV[12] instant (ms) the streak is lost if extended in the current period
  ARGV[13] instant (ms) the streak is lost if last covered in the previous period
  ARGV[14] event-attribute mask: one '1'/'0' per metric trigger of R.mt (computed in Node)
  ARGV[15] each board of R.lb: "run:threshold", or "-" when scheduled or finished
  ARGV[16] r, the number of profile fields to read (tz, the declared ua:<attr>, those sent)
  ARGV[17 .. 16+r] their names
  ARGV[17+r] n, the number of profile fields sent
  ARGV[18+r .. 17+r+2n] profile field, value pairs (em, nm, tz, se, dt, ua:<attr>)

  Reply
    {-1, storedZone}                    the zone assumption was wrong; nothing written
    {-2}                                the metric total would leave ±maxTotal; nothing written
    {2, eventId, total, streak, {}, {}} replay of an idempotency key; nothing written
    {1, eventId, total, streak, achievements, points, created, boards}
      streak       = {length, startPeriod|false, lastPeriod|false, extended 0/1, freezes|false,
                      grants|false, createdDay|false}
      achievements = {key, ...} completed by this request, in completion order
      points       = {{systemKey, added, total, before, award...}, ...} systems changed
      award        = "seq|ms|awarded|totalAfter|triggerKey"
      boards       = {{boardKey, run, oldValue|false, newValue, breakdown, rank|false,
                       previousRank|false, threshold}, ...} entries moved, with ranks
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
--@body
beginCall(tonumber(ARGV[3]), ARGV[1], ARGV[2])
local userKey, aggKey, streamKey = KEYS[1], KEYS[2], KEYS[3]
local eventId, idemField = ARGV[4], ARGV[5]
local value = tonumber(ARGV[6])
local tzSent, tzAssumed = ARGV[7], ARGV[8]
local nowPeriod, nowDay = tonumber(ARGV[9]), tonumber(ARGV[10])
local recordDetail = ARGV[11]
local deadlines = { tonumber(ARGV[12]), tonumber(ARGV[13]) }
local eventMask = ARGV[14]
local boards = parseBoards(ARGV[15])
local nRead = tonumber(ARGV[16])
local nProfile = tonumber(ARGV[17 + nRead])

-- 1. Read.
local original = loadState(userKey, idemField ~= '' and idemField or 's', { unpack(ARGV, 17, 16 + nRead) })

-- The stored streak; readers settle it (replays are answered without settling: no writes).
local function streakReply(extended)
  return { num('sl') or 0, num('ss') or false, num('sp') or false, extended and 1 or 0, num('fz') or false, num('fg') or false, num('cd') or false }
end

-- 2. Zone.
if tzSent == '' and (U.tz or 'UTC') ~= tzAssumed then return { -1, U.tz or 'UTC' } end

local oldTotal = num(R.mf) or 0

-- 3. Replay.
if idemField ~= '' and original then
  return { 2, original, oldTotal, streakReply(false), {}, {} }
end

-- 4. Range.
local newTotal = oldTotal + value
if newTotal > R.maxTotal or newTotal < -R.maxTotal then return { -2 } end

-- The key is stored with the event it first recorded (spec: idempotency rule 3).
local extraWrites = {}
if idemField ~= '' then extraWrites = { idemField, eventId } end

-- 5. User.
local created = not S.ct
local profileChanged = applyProfile(ARGV, 18 + nRead, nProfile)
if created then
  createUser(nowDay)
elseif profileChanged then
  set('up', now)
end

-- 6a. Metric total and metric triggers. A trigger with filters counts only the values of
-- events that pass them (its own running sum, t.tc); an unfiltered one counts the metric total.
set(R.mf, newTotal)
for i, t in ipairs(R.mt) do
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
for _, key in ipairs(R.mach) do
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
rcall('XADD', streamKey, '*', 'k', 'ev', 'u', userId, 't', now, 'z', U.tz or 'UTC', 'e', recordDetail .. string.format('|%d', newTotal), 'o', table.concat(outParts, ';'))

return { 1, eventId, newTotal, streakReply(extended), completed, pointsReply, created and 1 or 0, boardOut }
