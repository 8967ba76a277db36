--[[
  Records one metric event for one user, atomically: the whole event path of Laurel in one
  EVALSHA on the user's shard (DESIGN: "The hot path: one Redis round trip per event").

  The loader prepends `local R = {...}`: the tenant's rules narrowed to this metric
  (src/store/event-rules.ts), so nothing is decoded per call.

  Steps
    1. HMGET every field of the user's state hash this metric's rules read.
    2. Zone check: without a zone in the event, Node computed the periods for the zone it
       assumed; if the stored zone differs, reply -1 so Node recomputes and calls again.
    3. Idempotency (spec: idempotency rules 1-6): a key already used by this user on this
       metric replies 2 with the current state and writes nothing.
    4. Range check of the new metric total; reply -2 and write nothing when out of range.
    5. Upsert the user; a new user fires the user_creation triggers.
    6. Metric total; metric triggers on newly crossed multiples above the trigger's
       high-water mark; streak; metric achievements.
    7. Writes: one HSET of the state hash, shard counters (users, completions, levels), points
       zsets, award lists, and one XADD of the event's record to the shard stream.

  KEYS[1] user state hash   {t:s}:u:<userId>
  KEYS[2] shard counters    {t:s}:agg
  KEYS[3] shard stream      {t:s}:x

  ARGV[1]  key prefix {t:s}:   (points zsets and award lists are built from it)
  ARGV[2]  user id
  ARGV[3]  now, ms since epoch (the service clock)
  ARGV[4]  event id (uuid) for a new event
  ARGV[5]  idempotency field "i:<metric>:<key>", or '' without a key
  ARGV[6]  value in micro-units (integer)
  ARGV[7]  zone sent with the event, or ''
  ARGV[8]  zone Node computed the periods for
  ARGV[9]  current streak period index in that zone
  ARGV[10] stream record detail "metric|value|eventId", built by Node
  ARGV[11] streak deadline: the instant (ms) the streak is lost if extended now, i.e. the
           start of period nowPeriod+2 in the user's zone
  ARGV[12] n, the number of profile fields sent
  ARGV[13 .. 12+2n] profile field, value pairs (em, nm, tz, se, dt, ua:<attr>)

  Reply
    {-1, storedZone}                    the zone assumption was wrong; nothing written
    {-2}                                the metric total would leave ±MAX_TOTAL; nothing written
    {2, eventId, total, streak, {}, {}} replay of an idempotency key; nothing written
    {1, eventId, total, streak, achievements, points, created}
      streak       = {length, startPeriod|false, lastPeriod|false, extended 0/1}
      achievements = {key, ...} completed by this event
      points       = {{systemKey, added, total, before, award...}, ...} systems changed
      award        = "seq|ms|awarded|totalAfter|triggerKey"
]]
local rcall = redis.call
--@rules
local userKey, aggKey, streamKey = KEYS[1], KEYS[2], KEYS[3]
local prefix, userId = ARGV[1], ARGV[2]
local now = tonumber(ARGV[3])
local eventId, idemField = ARGV[4], ARGV[5]
local value = tonumber(ARGV[6])
local tzSent, tzAssumed = ARGV[7], ARGV[8]
local nowPeriod = tonumber(ARGV[9])
local recordDetail = ARGV[10]
local streakDeadline = tonumber(ARGV[11])
local nProfile = tonumber(ARGV[12])
-- @include "includes/math.lua"
-- @include "includes/state.lua"
-- @include "includes/points.lua"


-- 1. Read. The idempotency field goes first: only the last argument of a call can be unpacked.
local fields = R.fields
local vals = rcall('HMGET', userKey, idemField ~= '' and idemField or 'ct', unpack(fields))
for i = 1, #fields do S[fields[i]] = vals[i + 1] end

local function streakReply(extended)
  return { num('sl') or 0, num('ss') or false, num('sp') or false, extended and 1 or 0 }
end

-- 2. Zone.
if tzSent == '' then
  local effective = S.tz or 'UTC'
  if effective ~= tzAssumed then return { -1, effective } end
end

local metricField = R.mf
local oldTotal = num(metricField) or 0

-- 3. Replay.
if idemField ~= '' and vals[1] then
  return { 2, vals[1], oldTotal, streakReply(false), {}, {} }
end

-- 4. Range.
local newTotal = oldTotal + value
if newTotal > R.maxTotal or newTotal < -R.maxTotal then return { -2 } end

-- The key is stored with the event it first recorded (spec: idempotency rule 3).
if idemField ~= '' then set(idemField, eventId) end

-- 5. User.
local created = not S.ct
if created then
  set('ct', now)
  set('up', now)
end
local profileChanged = false
for i = 13, 12 + 2 * nProfile, 2 do
  local f, v = ARGV[i], ARGV[i + 1]
  if S[f] ~= v then
    set(f, v)
    profileChanged = true
  end
end
if profileChanged and not created then set('up', now) end

if created then
  for _, sys in ipairs(R.systems) do
    for _, t in ipairs(sys.uc) do award(sys, t.k, t.pts) end
  end
end

-- 6a. Metric total and metric triggers.
set(metricField, newTotal)
for _, sys in ipairs(R.systems) do
  for _, t in ipairs(sys.mt) do
    local hw = num(t.hw) or 0
    if newTotal > hw then
      set(t.hw, newTotal)
      local crossings = idiv(newTotal, t.th) - idiv(hw, t.th)
      if crossings > 0 then award(sys, t.k, crossings * t.pts) end
    end
  end
end

-- 6b. Streak: accumulate this period's value; extend once per period when the threshold is met.
local extended = false
local st = R.streak
if st then
  if num('sq') ~= nowPeriod then
    for _, m in ipairs(st.m) do
      if S[m.f] then set(m.f, 0) end
    end
    set('sq', nowPeriod)
  end
  set(st.f, (num(st.f) or 0) + value)
  local met = not st.any
  for _, m in ipairs(st.m) do
    local reached = (num(m.f) or 0) >= m.th
    if st.any and reached then met = true end
    if not st.any and not reached then met = false end
  end
  local last = num('sp')
  if met and (last == nil or nowPeriod > last) then
    local length = num('sl') or 0
    if last ~= nil and last == nowPeriod - 1 and length > 0 then
      length = length + 1
    else
      length = 1
      set('ss', nowPeriod)
    end
    set('sl', length)
    set('sp', nowPeriod)
    if length > (num('sb') or 0) then
      set('sb', length)
      rcall('ZADD', prefix .. 'sb', length, userId)
    end
    -- Active streaks by length, and when each is lost (read by rankings and the expiry sweep).
    rcall('ZADD', prefix .. 'sa', length, userId)
    rcall('ZADD', prefix .. 'sd', streakDeadline, userId)
    -- History: one member per extended period, "period:length" (the streak read and restore use it).
    local historyKey = prefix .. 'sh:' .. userId
    rcall('ZADD', historyKey, nowPeriod, nowPeriod .. ':' .. length)
    if nowPeriod % 64 == 0 then rcall('ZREMRANGEBYSCORE', historyKey, '-inf', nowPeriod - R.historyKept) end
    extended = true
  end
end

-- 6c. Metric achievements, completed once.
local completed = {}
for _, a in ipairs(R.ach) do
  if not S[a.f] and newTotal >= a.v then
    set(a.f, now)
    completed[#completed + 1] = a.k
  end
end

-- 7. Writes.
local outParts = {}
if created then
  rcall('HINCRBY', aggKey, 'users', 1)
  outParts[#outParts + 1] = 'c'
end
for i = 1, #completed do
  rcall('HINCRBY', aggKey, 'ac:' .. completed[i], 1)
  outParts[#outParts + 1] = 'a:' .. completed[i]
end
local pointsReply = flushPoints(prefix, aggKey, userId, outParts)
if extended then outParts[#outParts + 1] = 's:' .. num('sl') end
flushState(userKey)
rcall('XADD', streamKey, '*', 'k', 'ev', 'u', userId, 't', now, 'z', S.tz or 'UTC', 'e', recordDetail, 'o', table.concat(outParts, ';'))

return { 1, eventId, newTotal, streakReply(extended), completed, pointsReply, created and 1 or 0 }
