--[[
  Identifies, creates or updates one user (trophy-compat §3.1, §5.3), or patches the user's
  notification preferences. First identification does what it does in an event: user_creation
  triggers, time-trigger schedules, initial streak freezes.

  KEYS[1] user state hash   {t:s}:u:<userId>
  KEYS[2] shard counters    {t:s}:agg
  KEYS[3] shard stream      {t:s}:x, and the hook stream {t:s}:xh (includes/hooks.lua)

  ARGV[1] key prefix {t:s}:
  ARGV[2] user id
  ARGV[3] now, ms
  ARGV[4] mode: "upsert" (create or update), "update" (must exist), "prefs" (must exist)
  ARGV[5] local day index of now in the user's zone (stored as the day of first identification);
          when the request sends a zone and the tenant has a streak, followed by that zone's streak
          calendar: "day|period|lost-at if last covered in period|lost-at if in period - 1|
          start of period|start of period - 1" (instants, ms; includes/user.lua zoneCalendar)
  ARGV[6] preferences patch for "prefs", else '': "type=channel,channel;type=" (an empty list
          disables the type; a type not in the patch keeps its stored value)
  ARGV[7] each board of R.lb: its run, threshold and what was read with it, six little-endian doubles (leaderboards.lua boardsOf)
  ARGV[8] r, the number of profile fields to read; ARGV[9 .. 8+r] their names
  ARGV[9+r] n, the number of profile fields sent; then n field, value pairs

  Reply
    {0}                                             unknown user ("update", "prefs"); nothing written
    {1 created | 2 existed, ct, up, points, profile...}
      points  = as lua/event-2.lua (first identification awards)
      profile = the values of the r fields read, after the change, then np
]]
--@rules
-- @include "includes/context.lua"
-- @include "includes/math.lua"
-- @include "includes/state.lua"
-- @include "includes/points.lua"
-- @include "includes/user.lua"
-- @include "includes/leaderboards.lua"
-- @include "includes/hooks.lua"
local NOTIFICATION_TYPES = { 'achievement_completed', 'recap', 'reactivation', 'streak_reminder' }
--@body
beginCall(tonumber(ARGV[3]), ARGV[1], ARGV[2])
local userKey, aggKey, streamKey = KEYS[1], KEYS[2], KEYS[3]
local mode, prefsPatch = ARGV[4], ARGV[6]
local localDay, zonePeriod, sentCalendar = zoneCalendar(ARGV[5])
local boards = boardsOf(ARGV[7], 1)
local nRead = tonumber(ARGV[8])
local readFields = { unpack(ARGV, 9, 8 + nRead) }
readFields[#readFields + 1] = 'np'
local nProfile = tonumber(ARGV[9 + nRead])

loadState(userKey, readFields)
local created = not num('ct')
if created and mode ~= 'upsert' then return { 0 } end

local changed, zoneChanged = applyProfile(ARGV, 10 + nRead, nProfile)
-- A new zone moves a live streak's deadline to its calendar (sent with the zone: ARGV[5]).
if zoneChanged and sentCalendar then
  moveCalendar(zonePeriod, sentCalendar)
  placeDeadline(zonePeriod, sentCalendar)
end
if mode == 'prefs' then
  -- Each notification type sent replaces that type's channel list; others are kept.
  local prefs = {}
  for kind, channels in string.gmatch(U.np or '', '([^=;]+)=([^;]*)') do prefs[kind] = channels end
  for kind, channels in string.gmatch(prefsPatch, '([^=;]+)=([^;]*)') do prefs[kind] = channels end
  local parts = {}
  for _, kind in ipairs(NOTIFICATION_TYPES) do
    if prefs[kind] then parts[#parts + 1] = kind .. '=' .. prefs[kind] end
  end
  local encoded = table.concat(parts, ';')
  if encoded ~= (U.np or '') then
    setProfile('np', encoded)
    changed = true
  end
end

local outParts = {}
identify(created, changed, localDay, aggKey, outParts)
updateBoards(boards, 0, nil, outParts)
local pointsReply = flushPoints(outParts)
flushState(userKey)
if #outParts > 0 then
  appendRecord(streamKey, R.wh, 'us', userId, now, U.tz or 'UTC', mode, outParts)
end

local reply = { created and 1 or 2, num('ct'), num('up'), pointsReply }
for i = 1, #readFields do reply[#reply + 1] = U[readFields[i]] or false end
return reply
