--[[
  Pays one time trigger to the users of one shard who are due (trophy-compat §5.5: "every N
  hours/days"), at most `limit` users per call; the job calls again while `more` is 1.

  Catch-up rule: a user due at D with interval I is paid, at the tick at `now`, for every
  interval that has fully elapsed: n = floor((now - D) / I) + 1 intervals, as one award of
  their points, each interval boosted by the boosts active at its due instant, not at the tick
  (points.lua intervalPoints), and is next due at D + n x I. No interval is paid twice (the due
  time only moves forward) and none is skipped, however long the service was down.
  A user whose attributes do not match the trigger's filter at the tick is not paid for those
  intervals.

  KEYS[1] shard stream      {t:s}:x
  KEYS[2] the hook stream   {t:s}:xh (includes/hooks.lua)
  KEYS[3] the trigger's due set  {t:s}:tt:<system>.<trigger>
  KEYS[4] the trigger's system's points zset  {t:s}:pz:<system>
  These are the keys the caller can know. The others the call touches are of the same slot (the
  shard's hash tag, ARGV[1]) but cannot be declared up front, so they are built here from ARGV[1]:
  the due users' keys, which the script learns from KEYS[3] (their state hashes {t:s}:u:<user>,
  award lists {t:s}:aw:<system>:<user>, and their groups' totals {t:s}:pa:<system>:<attr>:<value>,
  named by the attribute values read from the hashes); and, for a tenant with leaderboards, the
  boards' keys (includes/leaderboards.lua: the rank counted over every shard's set of the run,
  and the run's counters {t}:lbc:<board>:<run>, a tenant key; README, Operations: Scaling).
  Declaring the users' keys would take a read of the due set first (a second round trip a batch,
  and a batch could change between the two).

  ARGV[1] key prefix {t:s}:
  ARGV[2] now, ms
  ARGV[3] index of the trigger in R.tt
  ARGV[4] limit, users per call
  ARGV[5] each board of R.lb: its run, threshold and what was read with it, six little-endian doubles (leaderboards.lua boardsOf)
  ARGV[6] r, the number of profile fields to read (tz, declared attributes); ARGV[7 .. 6+r]

  Reply {paid, more}
]]
--@rules
-- @include "includes/context.lua"
-- @include "includes/math.lua"
-- @include "includes/state.lua"
-- @include "includes/points.lua"
-- @include "includes/leaderboards.lua"
-- @include "includes/hooks.lua"
--@body
local trigger = R.tt[tonumber(ARGV[3])]
-- KEYS[2] and KEYS[4] are the names the includes build from the prefix (hooks.lua appendRecord,
-- points.lua flushPoints): declared here, built there, one name each.
beginCall(tonumber(ARGV[2]), ARGV[1], '')
local streamKey, dueKey = KEYS[1], KEYS[3]
local limit = tonumber(ARGV[4])
local boards = boardsOf(ARGV[5], 1)
local readFields = { unpack(ARGV, 7, 6 + tonumber(ARGV[6])) }

local due = rcall('ZRANGEBYSCORE', dueKey, '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)
local paid = 0
for j = 1, #due, 2 do
  local user, dueAt = due[j], tonumber(due[j + 1])
  beginUser(user)
  -- Learned from the due set: undeclared (the header).
  local userKey = prefix .. 'u:' .. user
  loadState(userKey, readFields)
  if not num('ct') then
    rcall('ZREM', dueKey, user)
  else
    local n = math.floor((now - dueAt) / trigger.ms) + 1
    if matches(trigger.f) then award(trigger.s, trigger.k, intervalPoints(trigger.s, trigger.pts, dueAt, trigger.ms, n), true) end
    local outParts = {}
    updateBoards(boards, 0, nil, outParts)
    local pointsReply = flushPoints(outParts)
    if #pointsReply > 0 then
      paid = paid + 1
      flushState(userKey)
      appendRecord(streamKey, R.wh, 'tt', user, now, U.tz or 'UTC', trigger.k, outParts)
    end
    rcall('ZADD', dueKey, dueAt + n * trigger.ms, user)
  end
end
return { paid, (#due == 2 * limit) and 1 or 0 }
