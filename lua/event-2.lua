--[[
  Records one metric event for one user, atomically: the whole event path of Laurel in one
  EVALSHA on the user's shard (DESIGN: "The hot path: one Redis round trip per event").

  The loader replaces --@rules with `local R = {...}`: the tenant's rules narrowed to what an
  event on this metric can reach (src/store/rules.ts). Everything above --@body is the library
  part (built once when loaded as a Redis Function); below it is the call.

  Steps
    1. HMGET the user's state (`s`, msgpack), the idempotency field, the declared attributes,
       and the stored zone when the event sent none. A call this script already applied (re-sent,
       and its number not above the last one its writer applied on this shard, KEYS[2]) answers
       3 and writes nothing: ioredis re-sends every command still unanswered when its connection
       drops, and Redis may have run it before the drop (includes/call-order.lua,
       test/integration/lost-reply.test.ts). Not a rule of the API: the reference model has no
       counterpart.
    2. Zone check: without a zone in the event, Node computed the calendar for the zone it
       assumed; if the stored zone differs, reply -1 so Node recomputes and calls again.
    3. Idempotency (spec: idempotency rules 1-6): a key already used by this user on this
       metric replies 2 with the current state and writes nothing. Forever by default (a field
       of the user's hash, read by the HMGET of step 1); with the tenant's idempotency window
       (R.iw), only within the window after the key's event (its own expiring key, KEYS[3]),
       or forever if the hash holds it (stored before the tenant had a window). A key's own key
       is looked at without a window too (one GET per new key): stored while the tenant had one,
       it is honoured until its window passes.
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
  KEYS[2] the writer's record on the shard  {t:s}:wr:<writer> (includes/call-order.lua)
  KEYS[3] with a key sent: the key's own key {t:s}:ik:<metric>:<user>\x1f<key> (written with R.iw), value
          "<eventId>|<until ms>" (the service clock decides; Redis expires it after the window)
  The shard's other keys ({t:s}:agg counters, {t:s}:x stream and its hook stream {t:s}:xh
  (includes/hooks.lua), zsets, lists) are built from the prefix: they share the user's hash tag,
  so the same slot. Every argument costs Redis ~1k instructions (parsed from the request, then
  made a Lua string: hashed and interned), so the call carries as few as it can (bench/README.md, "Instructions per event script").

  ARGV[1]  key prefix {t:s}:
  ARGV[2]  user id
  ARGV[3]  the numbers, little-endian doubles (struct): now (ms since epoch, the service clock),
           value in micro-units, current streak period index and current local day index in the
           zone Node computed the calendar for, the instant (ms) the streak is lost if extended
           in the current period, and if last covered in the previous period, flags (bits: 1 the
           event sent its zone; 2 the call may have run already, re-sent after a dropped
           connection, so step 1 reads its writer's record; 4 set the record's expiry:
           includes/call-order.lua), the profile digest, n (profile pairs in ARGV[7]), the
           event-attribute mask (the bits R.mt[i].eb of the filtered metric triggers whose
           filters the event passes: Node evaluates them), the call's number (grows with every
           call its Redis client sends: src/store/call-order.ts; step 1), the instants (ms) the
           current and the previous streak periods began (moveCalendar, state.lua), then per
           board of R.lb its current run, threshold and what was read with it as six doubles
           (leaderboards.lua boardsOf; run -1 while scheduled or finished).
           Binary because `tonumber` of a decimal string costs ~1.8k instructions (strtod);
           struct.unpack reads ten for about one. (Node encodes a command with a binary argument
           itself: src/store/redis-script.ts encodeCommand.)
  ARGV[4]  the zone Node computed the calendar for: the event's, or the one it assumed
  ARGV[5]  idempotency field "i:<metric>:<key>", or '' without a key
  ARGV[6]  stream record detail "metric|value|eventId|day|month" (the local day and its monthly
           period, for the stream worker's daily buckets); the script appends "|total"
  ARGV[7]  the profile fields sent, "field\0value\0..." (em, nm, tz, se, dt, ua:<attr>; values
           carry no control characters). Read only when the digest differs from the state's
           `pd`, the digest of the last profile an event applied (user.lua applyProfileText):
           an event repeating the profile costs no profile reads or writes.
  ARGV[8]  now (ARGV[3]'s first number) as decimal digits, as string.format('%d') gives them:
           the records carry it as text, and Node writes it for less than Lua formats it
  ARGV[9]  event id (uuid), only with an idempotency key (the key's stored value)

  Reply: ONE flat array. Redis converts a Lua table to RESP with ~7 field lookups per table
  (err, ok, double, map...), so nested tables cost ~5k instructions each; counts announce the
  variable-length parts instead.
    {-1, storedZone}      the zone assumption was wrong; nothing written
    {-2}                  the metric total would leave ±maxTotal; nothing written
    {2, eventId, total, streak..., storedZone?}    replay of an idempotency key; nothing written
                                                   (storedZone only when the event sent a zone)
    {3, false, total, streak...}                   a call already applied, re-sent (step 1);
                                                   nothing written (Node knows its event id)
    {1, false, total, streak..., #achievements, key..., #points, points..., #boards, boards...}
                               (Node knows the new event's id)
      streak   = length, startPeriod|false, lastPeriod|false (the last covered: lastCovered,
                 state.lua), extended 0/1, freezes|false, grants|false, createdDay|false,
                 startDay|false, grantDay|false (9 values; startDay: the local day a weekly or
                 monthly streak began, ssd; grantDay: the local day of the last auto-earned
                 freeze, fgd)
      key      = an achievement completed by this request, in completion order
      points   = per system changed: systemKey, added, total, before, #awards, award...
      award    = "seq|ms|awarded|totalAfter|triggerKey"
      boards   = per entry moved (8 values): boardKey, run, oldValue|false, newValue, breakdown,
                 rank|false, previousRank|false, threshold
]]
--@rules
-- @include "includes/context.lua"
-- @include "includes/call-order.lua"
-- @include "includes/math.lua"
-- @include "includes/state.lua"
-- @include "includes/points.lua"
-- @include "includes/achievements.lua"
-- @include "includes/user.lua"
-- @include "includes/streak.lua"
-- @include "includes/leaderboards.lua"
-- @include "includes/hooks.lua"

-- Tables of every call, kept by the library and refilled: a table made per call costs Lua an
-- allocation, its growth (a rehash at each power of two) and its collection (bench/README.md,
-- the twenty-third stop). Redis converts the reply before the next call runs.
local REPLY, OUT_PARTS, EXTRA_WRITES, CALENDAR = {}, {}, {}, { false, false, false, false }
local REPLY_HEAD = 12
-- The shard's counters and stream keys by shard prefix, {agg, x}, kept across calls: made per
-- call they were two concatenations, each a new string to hash and collect.
local SHARD_KEYS = {}

-- The reply's head: status, event id, metric total, then the stored streak (readers
-- settle it; replays are answered without settling: no writes) with `last`, its last period on
-- the event's calendar (lastCovered, state.lua). Written into REPLY, ended by a nil (Redis
-- converts an array up to its first nil): the main path appends after it.
local function eventReplyHead(status, id, total, extended, last)
  local r = REPLY
  r[1], r[2], r[3] = status, id, total
  r[4], r[5], r[6], r[7] = S[I_SL] or 0, S[I_SS] or false, last or false, extended and 1 or 0
  r[8], r[9], r[10], r[11] = S[I_FZ] or false, S[I_FG] or false, S[I_CD] or false, I_SSD and S[I_SSD] or false
  r[12] = I_FGD and S[I_FGD] or false
  r[REPLY_HEAD + 1] = nil
  return r
end
-- The event a windowed Idempotency-Key recorded while it is remembered (step 3), else nil.
local function rememberedEvent(key, nowMs)
  local stored = rcall('GET', key)
  if not stored then return nil end
  local bar = string.find(stored, '|', 1, true)
  if tonumber(string.sub(stored, bar + 1)) <= nowMs then return nil end
  return string.sub(stored, 1, bar - 1)
end
--@body
bindStdlib()
local nowMs, value, nowPeriod, nowDay, lostIfExtended, lostIfPrevious, flags, digest, nProfile, eventMask, callNumber, periodStart, previousStart = sunpack('<ddddddddddddd', ARGV[3])
beginCall(nowMs, ARGV[1], ARGV[2], ARGV[8])
local userKey, writerKey = KEYS[1], KEYS[2]
local shardKeys = SHARD_KEYS[prefix]
if not shardKeys then
  shardKeys = { prefix .. 'agg', prefix .. 'x' }
  SHARD_KEYS[prefix] = shardKeys
end
local aggKey, streamKey = shardKeys[1], shardKeys[2]
local zone, idemField, recordDetail = ARGV[4], ARGV[5], ARGV[6]
local zoneSent = band(flags, 1) ~= 0
local calendar = CALENDAR
calendar[1], calendar[2], calendar[3], calendar[4] = lostIfExtended, lostIfPrevious, periodStart, previousStart
local boards = boardsOf(ARGV[3], 105)

-- 1. Read.
local idemKey = idemField ~= '' and KEYS[3] or nil
local original = loadState(userKey, zoneSent and R.pf or R.pfz, idemField ~= '' and idemField or nil)
-- A key is in the hash (stored forever: no window, or before the tenant had one) or its own
-- expiring key (stored with a window, honoured until it passes, also once the window is gone
-- from the config: without this GET a key sent a minute before was counted again).
if idemKey and not original then original = rememberedEvent(idemKey, nowMs) end
if band(flags, 2) ~= 0 and appliedBefore(writerKey, callNumber) then return eventReplyHead(3, false, S[R.mfi] or 0, false, lastCovered()) end

-- 2. Zone.
if not zoneSent and (U.tz or 'UTC') ~= zone then return { -1, U.tz or 'UTC' } end

local oldTotal = S[R.mfi] or 0

-- 3. Replay. It writes nothing, a zone it sent included: with one sent, the stored zone follows
-- the head, for Node to read the streak on the user's calendar, not the replay's (read on a zone
-- a day ahead, a live streak answered as lost).
if idemField ~= '' and original then
  local r = eventReplyHead(2, original, oldTotal, false, lastCovered())
  if zoneSent then r[REPLY_HEAD + 1], r[REPLY_HEAD + 2] = rcall('HGET', userKey, 'tz') or 'UTC', nil end
  return r
end

-- 4. Range.
local newTotal = oldTotal + value
if newTotal > R.maxTotal or newTotal < -R.maxTotal then return { -2 } end

-- The call is applied: its number is its writer's last on this shard (step 1).
markApplied(writerKey, callNumber, band(flags, 4) ~= 0)

-- The key is stored with the event it first recorded (spec: idempotency rule 3).
local extraWrites = EXTRA_WRITES
emptyList(extraWrites)
if R.iw and idemKey then
  rcall('SET', idemKey, ARGV[9] .. '|' .. sformat('%d', nowMs + R.iw), 'PX', R.iw)
elseif idemField ~= '' then
  extraWrites[1], extraWrites[2] = idemField, ARGV[9]
end

-- 5. User.
local created = not S[I_CT]
local profileChanged, zoneChanged = false, false
if nProfile > 0 and num('pd') ~= digest then
  profileChanged, zoneChanged = applyProfileText(userKey, ARGV[7], nProfile, created)
  set('pd', digest)
end
if created then
  createUser(nowDay)
elseif profileChanged then
  set('up', now)
end

-- 6a. Metric total and metric triggers. A trigger with filters counts only the values of
-- events that pass them (its own running sum, t.tc); an unfiltered one counts the metric total.
-- The running sum saturates at the metric total's range (±maxTotal): events the filter passes
-- can move it further than the total, and beyond 2^53 micro-units it would lose exactness.
-- A trigger's mark starts where its count stands when the trigger first counts for the user
-- (added to the config since, or its filters added or removed: the mark held was of the other
-- count): an unfiltered one at the metric total before this event, a filtered one's own sum at 0.
-- So an edit pays from its start on: neither the progress made before it (a burst) nor a mark of
-- the other count to climb past first (a stall). t.otci: the own sum of a trigger whose filters
-- were removed, still stored (the config had them; its presence says the mark is of the sum).
put(R.mfi, newTotal)
local metricTriggers = R.mt
for i = 1, #metricTriggers do
  local t = metricTriggers[i]
  if (not t.eb or mfloor(eventMask / t.eb) % 2 == 1) and matches(t.f) then
    local counted = newTotal
    local hw = S[t.hwi]
    if t.tc then
      local own = S[t.tci]
      if not own then
        own = 0
        if hw then put(t.hwi, false); hw = false end
      end
      counted = own + value
      if counted > R.maxTotal then counted = R.maxTotal elseif counted < -R.maxTotal then counted = -R.maxTotal end
      put(t.tci, counted)
    elseif not hw or (t.otci and S[t.otci]) then
      if t.otci and S[t.otci] then put(t.otci, false) end
      local mark = oldTotal > 0 and oldTotal or false
      if hw ~= mark then put(t.hwi, mark) end
      hw = mark
    end
    hw = hw or 0
    if counted > hw then
      put(t.hwi, counted)
      local crossings = idiv(counted, t.th) - idiv(hw, t.th)
      if crossings > 0 then award(t.s, t.k, crossings * t.pts) end
    end
  end
end

-- 6b. Streak.
-- The event moved the user to another zone: the streak continues on its calendar (nowPeriod and
-- the calendar are the event's zone's, which is now the stored one), and so does its deadline.
if zoneChanged and not created then moveCalendar(nowPeriod, calendar) end
if not created then settleStreak(nowDay, nowPeriod) end
local extended = extendStreak(nowPeriod, nowDay, value, calendar)
if zoneChanged and not created then placeDeadline(nowPeriod, calendar) end

-- 6c. Metric achievements of this metric.
local metricAchievements = R.mach
for i = 1, #metricAchievements do
  local key = metricAchievements[i]
  if newTotal >= R.ach[key].v then complete(key) end
end

-- 7. Writes.
local outParts = OUT_PARTS
emptyList(outParts)
if created then
  rcall('HINCRBY', aggKey, 'users', '1')
  outParts[#outParts + 1] = 'c'
end
flushAchievements(aggKey, outParts)
local streakChanged = (extended or streakOut.lost > 0) and (S[I_SL] or 0) or nil
updateBoards(boards, value, streakChanged, outParts)
local changedSystems = flushPoints(outParts, true)
streakOutcome(outParts, extended)
flushState(userKey, extraWrites)
appendRecord(streamKey, R.wh, 'ev', userId, nowString(), zone, recordDetail .. sformat('|%d', newTotal), outParts)

-- Appended by index, not through a helper: a closure costs Lua ~1.6k instructions a call.
local reply = eventReplyHead(1, false, newTotal, extended, lastCovered())
local n = REPLY_HEAD + 1
reply[n] = #completed
for i = 1, #completed do n = n + 1; reply[n] = completed[i] end
n = n + 1; reply[n] = #changedSystems
for i = 1, #changedSystems do
  local o = changedSystems[i]
  local recs = o.recs
  reply[n + 1], reply[n + 2], reply[n + 3], reply[n + 4], reply[n + 5] = o.sys.key, o.added, o.total, o.before, #recs
  n = n + 5
  for j = 1, #recs do n = n + 1; reply[n] = recs[j] end
end
n = n + 1; reply[n] = #boardOut / 8
for i = 1, #boardOut do n = n + 1; reply[n] = boardOut[i] end
reply[n + 1] = nil
return reply
