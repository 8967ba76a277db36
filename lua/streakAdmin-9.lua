--[[
  Streak operations outside events: grant freezes or restore a lost streak (admin, trophy-compat
  §2.2 #25, #26), or only settle (the expiry sweep: freezes consumed, streak lost, at the moment
  the deadline passes rather than at the next event). All settle first, as an event would.

  KEYS[1] user state hash   {t:s}:u:<userId>
  KEYS[2] shard counters    {t:s}:agg, not read: the keys of every user script (user-store.ts userKeys)
  KEYS[3] shard stream      {t:s}:x
  KEYS[4] the writer's record on the shard  {t:s}:wr:<writer> (includes/call-order.lua)
  KEYS[5] the hook stream   {t:s}:xh (includes/hooks.lua)
  KEYS[6] active streaks    {t:s}:sa
  KEYS[7] streak deadlines  {t:s}:sd
  KEYS[8] longest streaks   {t:s}:sb
  KEYS[9] the user's streak history {t:s}:sh:<userId>
  Every key the script touches is one of these, all of the user's slot, as Redis Cluster expects
  of a script (DESIGN.md), but a tenant's leaderboards': a streak board moved by a restore or a
  loss counts its rank over every shard's set of the run and writes the run's counters
  {t}:lbc:<board>:<run>, a tenant key (README, Operations: Scaling, what still assumes one Redis),
  so includes/leaderboards.lua builds the board keys from ARGV[1] as it does for the event script.

  ARGV[1] key prefix {t:s}: the includes build KEYS[5] to KEYS[9] from it (the same names) and
          includes/leaderboards.lua the board keys (the script awards no points, so points.lua
          names no award list or group total with it)
  ARGV[2] user id
  ARGV[3] now, ms
  ARGV[4] op: "freeze", "restore" or "settle"
  ARGV[5] zone Node computed the calendar for (checked against the stored zone)
  ARGV[6] current local day index; ARGV[7] current streak period index
  ARGV[8] instant the streak is lost if last covered in the previous period
  ARGV[9] instant the streak is lost if extended in the current period
  ARGV[10] "freeze": how many freezes to grant; "restore": first period of the restore window
  ARGV[11] each board of R.lb: its run, threshold and what was read with it, six little-endian doubles (leaderboards.lua boardsOf)
  ARGV[12] the call's number (src/store/call-order.ts): a "freeze" call this script already
           applied, re-sent by ioredis after the connection dropped before its reply, answers
           {5} and grants nothing again ("restore" and "settle" give the same result twice)

  Reply
    {-1, storedZone}         the zone assumption was wrong; nothing written
    {0}                      unknown user; nothing written, except that "settle" removes the
                             user's entries in {t:s}:sa and {t:s}:sd, which a state lost or deleted
                             by hand left there (the sweep read them again at every page and tick)
    "freeze":  {1, granted, held}      granted may be less than asked (the maximum)
    "restore": {1, length} restored | {3} no streak in the window | {4} already at that length
    "settle":  {1, consumed, lost length (0 = not lost), due (1: still due in {t:s}:sd)}
    {5}                      "freeze" already applied (KEYS[4], ARGV[12]); nothing written
]]
--@rules
-- @include "includes/context.lua"
-- @include "includes/call-order.lua"
-- @include "includes/math.lua"
-- @include "includes/state.lua"
-- @include "includes/points.lua"
-- @include "includes/achievements.lua"
-- @include "includes/streak.lua"
-- @include "includes/leaderboards.lua"
-- @include "includes/hooks.lua"
--@body
-- KEYS[5] to KEYS[9] are the names the includes build from the prefix (streak.lua, state.lua,
-- hooks.lua appendRecord): declared here, built there, one name each.
beginCall(tonumber(ARGV[3]), ARGV[1], ARGV[2])
local userKey, streamKey, writerKey = KEYS[1], KEYS[3], KEYS[4]
local activeKey, deadlineKey, historyKey = KEYS[6], KEYS[7], KEYS[9]
local op, tzAssumed = ARGV[4], ARGV[5]
local nowDay, nowPeriod = tonumber(ARGV[6]), tonumber(ARGV[7])
local deadlinePrevious, deadlineCurrent = tonumber(ARGV[8]), tonumber(ARGV[9])
local amount = tonumber(ARGV[10])
local boards = boardsOf(ARGV[11], 1)

-- A user without state has no streak: what the streak indexes hold of them is an orphan. Only the
-- sweep ("settle") reads those indexes for work, so it clears them, as settling a lost streak does
-- (includes/streak.lua) and as timeTick-4.lua drops such a user from its due set.
local function forgetOrphanStreak()
  rcall('ZREM', activeKey, userId)
  rcall('ZREM', deadlineKey, userId)
end

-- The zone, and each breakdown board's attribute: updateBoards moves a streak restored or lost
-- here in the user's group (without it, U held no attribute and the breakdown boards were skipped).
local readFields = { 'tz' }
for i = 1, #R.lb do
  if R.lb[i].bd then readFields[#readFields + 1] = R.lb[i].bd end
end
loadState(userKey, readFields)
if not num('ct') then
  if op == 'settle' then forgetOrphanStreak() end
  return { 0 }
end
local callNumber = tonumber(ARGV[12])
if op == 'freeze' and appliedBefore(writerKey, callNumber) then return { 5 } end
if (U.tz or 'UTC') ~= tzAssumed then return { -1, U.tz or 'UTC' } end

settleStreak(nowDay, nowPeriod)
-- A live streak's deadline on the stored zone's calendar: moved by the freezes just consumed, or
-- by a zone change the index did not follow (written before zone changes placed it).
placeDeadline(nowPeriod, { deadlineCurrent, deadlinePrevious })

local outParts = {}
local reply
if op == 'settle' then
  -- due: still in the index at or before now (the sweep steps past it rather than loop on it).
  local score = rcall('ZSCORE', deadlineKey, userId)
  reply = { 1, streakOut.consumed, streakOut.lost, (score and tonumber(score) <= now) and 1 or 0 }
elseif op == 'freeze' then
  local held = num('fz') or 0
  local granted = math.max(0, math.min(amount, R.streak.fz.max - held))
  markApplied(writerKey, callNumber, true)
  if granted > 0 then
    set('fz', held + granted)
    outParts[#outParts + 1] = 'fa:' .. granted
  end
  reply = { 1, granted, held + granted }
else
  -- The longest length the streak reached within the window (history: "period:length[:f]").
  local best = 0
  for _, member in ipairs(rcall('ZRANGEBYSCORE', historyKey, amount, '+inf')) do
    local length = tonumber(string.match(member, '^[^:]+:(%d+)'))
    if length > best then best = length end
  end
  local length, last = num('sl') or 0, lastCovered()
  local alive = length > 0 and last ~= nil and last >= nowPeriod - 1
  if best == 0 then
    reply = { 3 }
  elseif alive and length >= best then
    reply = { 4 }
  else
    -- Restored: alive at that length, extendable in the current period (or already extended in it).
    local newLast = (last ~= nil and last >= nowPeriod) and last or (nowPeriod - 1)
    local first = newLast - best + 1
    set('ss', first)
    -- A restored streak is placed, not begun on a day: `started` shows its first period's first
    -- day (src/domain/streak.ts streakFirstDay), never the day an earlier streak began.
    if I_SSD then put(I_SSD, false) end
    -- Lost as placeDeadline (state.lua) places it: a last period ahead of now (a move west) as
    -- the current one, never a period earlier than the zone change placed it.
    storeStreak(best, newLast, newLast >= nowPeriod and deadlineCurrent or deadlinePrevious)
    -- `extended` (the streak reads): the last extension when the restored streak keeps it
    -- (today's; a live streak's yesterday's is kept too, as newLast ~= last only when the
    -- streak was lost or last covered before yesterday); otherwise the streak came alive now.
    if newLast ~= last then set('sxt', now) end
    -- The history then holds the streak the user now has: its periods extended one by one, 1 to
    -- best, ending at its last period. The streak read's history and `started` and wrapped's
    -- longest streak (which walks back to a length of 1) all read it; what those periods held
    -- before (a gap, the start of a new streak, the old streak's own entries) is replaced.
    -- In ZADDs of at most 1000 entries: unpack refuses more than ~8000 values, and a streak of
    -- thousands of days would fail after the ZREMRANGEBYSCORE (a script's writes are not undone).
    rcall('ZREMRANGEBYSCORE', historyKey, first, newLast)
    for from = 1, best, 1000 do
      local entries = {}
      for i = from, math.min(best, from + 999) do
        entries[#entries + 1] = first + i - 1
        entries[#entries + 1] = (first + i - 1) .. ':' .. i
      end
      rcall('ZADD', historyKey, unpack(entries))
    end
    outParts[#outParts + 1] = 'sr:' .. best
    reply = { 1, best }
  end
end
streakOutcome(outParts, false)
local restored = reply[1] == 1 and op == 'restore'
updateBoards(boards, 0, (restored or streakOut.lost > 0) and (num('sl') or 0) or nil, outParts)
local pointsReply = flushPoints(outParts)
flushState(userKey)
if #outParts > 0 then
  appendRecord(streamKey, R.wh, 'sa', userId, now, U.tz or 'UTC', op, outParts)
end
return reply
