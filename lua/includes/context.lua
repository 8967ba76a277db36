--[[
  Per-call context, shared by every include. These are library-level locals: loaded as a Redis
  Function, the library runs once and its helpers are defined once, so each call must begin with
  beginCall(). Redis runs one call at a time; nothing leaks from one call into the next.
]]
local rcall, now, prefix, userId
-- state.lua: the user's hot state, profile fields, what changed.
local S, U, stateDirty, profileDirty
-- points.lua: per-system outcome of this call.
local P, pointsOrder, boostCache
-- achievements.lua, streak.lua, leaderboards.lua: what this call completed, consumed, earned,
-- lost, and the board entries it moved.
local completed, streakOut, boardOut

local function beginUser(user)
  userId = user
  S, U, stateDirty, profileDirty = {}, {}, false, {}
  P, pointsOrder, boostCache = {}, {}, {}
  completed = {}
  streakOut = { consumed = 0, earned = 0, lost = 0, frozen = {} }
  boardOut = {}
end

local function beginCall(nowMs, keyPrefix, user)
  rcall = redis.call
  now, prefix = nowMs, keyPrefix
  beginUser(user)
end
