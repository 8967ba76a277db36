--[[
  Completes an API achievement for one user (POST /v1/achievements/{key}/complete,
  trophy-compat §2.2 #2, §3.4), upserting the user first. A completion fires the achievement's
  triggers and may complete composites; completing twice changes nothing.

  KEYS[1] user state hash   {t:s}:u:<userId>
  KEYS[2] shard counters    {t:s}:agg
  KEYS[3] shard stream      {t:s}:x, and the hook stream {t:s}:xh (includes/hooks.lua)
  KEYS[4] the writer's record on the shard  {t:s}:wr:<writer> (includes/call-order.lua)

  ARGV[1] key prefix {t:s}:
  ARGV[2] user id
  ARGV[3] now, ms
  ARGV[4] achievement key (an "api" achievement of R.ach)
  ARGV[5] local day index of now (stored as the day of first identification if the user is new);
          with a zone sent and a streak rule, that zone's streak calendar after it (user-3.lua)
  ARGV[6] each board of R.lb: its run, threshold and what was read with it, six little-endian doubles (leaderboards.lua boardsOf)
  ARGV[7] r, the number of profile fields to read; ARGV[8 .. 7+r] their names
  ARGV[8+r] n, the number of profile fields sent; then n field, value pairs
  ARGV[last] the call's number (src/store/call-order.ts)

  Reply
    {2, achievedAt}                                  already completed; nothing written
    {5, achievedAt, completed, points}               already completed, and composites above it
                                                     whose parts were all done completed now (added
                                                     to the tenant file, or stripped of the part the
                                                     user lacked, since: achievements.lua complete);
                                                     only those and what they paid are written, not
                                                     the profile sent
    {4, achievedAt}                                  a call applied already (its number at or below
                                                     the writer's last on the shard): ioredis re-sent
                                                     it after the connection dropped before its
                                                     reply (KEYS[4]); nothing written. achievedAt is
                                                     this call's `now` when the call completed it
    {3}                                              the user's attributes do not match; nothing written
    {1, achievedAt, completed, points}               completed now (completed = keys, in order)
]]
--@rules
-- @include "includes/context.lua"
-- @include "includes/call-order.lua"
-- @include "includes/math.lua"
-- @include "includes/state.lua"
-- @include "includes/points.lua"
-- @include "includes/achievements.lua"
-- @include "includes/user.lua"
-- @include "includes/leaderboards.lua"
-- @include "includes/hooks.lua"
--@body
beginCall(tonumber(ARGV[3]), ARGV[1], ARGV[2])
local userKey, aggKey, streamKey, writerKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local callNumber = tonumber(ARGV[#ARGV])
local key = ARGV[4]
local localDay, zonePeriod, sentCalendar = zoneCalendar(ARGV[5])
local boards = boardsOf(ARGV[6], 1)
local nRead = tonumber(ARGV[7])
local nProfile = tonumber(ARGV[8 + nRead])

loadState(userKey, { unpack(ARGV, 8, 7 + nRead) })
local a = R.ach[key]
if num(a.f) then
  -- Completed by this call, whose reply was lost, or by another request: the client of this
  -- call should hear 201 only in the first case.
  if appliedBefore(writerKey, callNumber) then return { 4, num(a.f) } end
  -- Met again though done: a composite above it whose parts are all done completes now, as at
  -- an event meeting a done part (achievements.lua complete). A composite of API parts only
  -- has no other way to complete for a user who had them all before it was added.
  if a.up then complete(key) end
  if #completed == 0 then return { 2, num(a.f) } end
  markApplied(writerKey, callNumber, true)
  local outParts = {}
  flushAchievements(aggKey, outParts)
  updateBoards(boards, 0, nil, outParts)
  local pointsReply = flushPoints(outParts)
  flushState(userKey)
  appendRecord(streamKey, R.wh, 'ac', userId, now, U.tz or 'UTC', key, outParts)
  return { 5, num(a.f), completed, pointsReply }
end

local created = not num('ct')
-- Eligibility is checked with the attributes this request sends, before anything is written
-- (applying the profile first moved the user between the attribute indexes of a refused request).
if not matchesWithProfile(a.ua, ARGV, 9 + nRead, nProfile) then return { 3 } end
local changed, zoneChanged = applyProfile(ARGV, 9 + nRead, nProfile)
-- A new zone moves a live streak's deadline to its calendar (sent with the zone: ARGV[5]).
if zoneChanged and sentCalendar then
  moveCalendar(zonePeriod, sentCalendar)
  placeDeadline(zonePeriod, sentCalendar)
end

markApplied(writerKey, callNumber, true)
local outParts = {}
identify(created, changed, localDay, aggKey, outParts)
complete(key)
flushAchievements(aggKey, outParts)
updateBoards(boards, 0, nil, outParts)
local pointsReply = flushPoints(outParts)
flushState(userKey)
appendRecord(streamKey, R.wh, 'ac', userId, now, U.tz or 'UTC', key, outParts)
return { 1, now, completed, pointsReply }
