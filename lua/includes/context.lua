--[[
  Per-call context, shared by every include. These are library-level locals: loaded as a Redis
  Function, the library runs once and its helpers are defined once, so each call must begin with
  beginCall(). Redis runs one call at a time; nothing leaks from one call into the next.
]]
local rcall, now, prefix, userId
-- `now` as text (made on first use in a call).
local nowText
-- The standard library functions the hot paths call, bound by bindStdlib at a library's first
-- call: a Function library cannot reach the globals while it loads, and `bit.band` through them
-- is two table lookups (the globals, then the module) on every use, ~40 of them an event (Lua by
-- line: bench/lua-line-profile.mjs). `next` and `unpack` are shadowed under their own names, so
-- every include after this one uses the bound ones; the others take names of their own.
local sformat, band, spack, sunpack, mpack, munpack, munpackLimit, sbyte, mfloor, mmin, next, unpack
-- state.lua: the user's hot state, profile fields, what changed.
local S, U, stateDirty, profileDirty
-- points.lua: per-system outcome of this call.
local P, pointsOrder, boostMult, boostRounding
-- achievements.lua, streak.lua, leaderboards.lua: what this call completed, consumed, earned,
-- lost, and the board entries it moved.
local completed, streakOut, boardOut

-- The per-user tables are made once per library and emptied for each user (a script may work
-- on several users, lua/timeTick-4.lua): a table costs Lua an allocation, its growth and its
-- collection, ~10 of them ~3% of an event script (callgrind). S comes from loadState.
U, profileDirty, P, pointsOrder, boostMult, boostRounding = {}, {}, {}, {}, {}, {}
completed, boardOut = {}, {}
streakOut = { consumed = 0, earned = 0, lost = 0, frozen = {} }

-- Binds the locals above (once per library; redis.call is a library's `rcall`). Every call runs it
-- first: beginCall does, and a body that needs one before beginCall calls it itself.
local function bindStdlib()
  if rcall then return end
  rcall, sformat = redis.call, string.format
  band, spack, sunpack, mpack, munpack = bit.band, struct.pack, struct.unpack, cmsgpack.pack, cmsgpack.unpack
  munpackLimit, sbyte = cmsgpack.unpack_limit, string.byte
  mfloor, mmin, next, unpack = math.floor, math.min, _G.next, _G.unpack
end

local function emptyList(t)
  for i = #t, 1, -1 do t[i] = nil end
end

local function beginUser(user)
  userId = user
  S, stateDirty = nil, false
  for k in next, U do U[k] = nil end
  -- P and the boost caches are keyed by system index (R.sys), not always from 1.
  for k in next, P do P[k] = nil end
  for k in next, boostMult do boostMult[k] = nil end
  for k in next, boostRounding do boostRounding[k] = nil end
  -- Most of these lists are empty after most calls: a look at the first slot costs less than
  -- the call (a Lua call is ~200 machine instructions before its loop runs).
  if profileDirty[1] ~= nil then emptyList(profileDirty) end
  emptyList(pointsOrder)
  if completed[1] ~= nil then emptyList(completed) end
  if boardOut[1] ~= nil then emptyList(boardOut) end
  streakOut.consumed, streakOut.earned, streakOut.lost = 0, 0, 0
  if streakOut.frozen[1] ~= nil then emptyList(streakOut.frozen) end
end

-- nowDigits: `now` as decimal digits when the caller sent them (the event script: an argument
-- costs Redis ~1k instructions, a string.format ~3.5k); nil to format them on first use.
local function beginCall(nowMs, keyPrefix, user, nowDigits)
  bindStdlib()
  now, prefix, nowText = nowMs, keyPrefix, nowDigits
  beginUser(user)
end


-- `now` as text, once per call: the award records and the stream record both carry it (turning
-- a number into text is a printf, in Lua or in redis.call alike).
local function nowString()
  if not nowText then nowText = sformat('%d', now) end
  return nowText
end
