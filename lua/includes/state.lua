--[[
  The user's state hash ({t:s}:u:<user>), read once with HMGET and written once with HSET.

  Hot state lives in ONE field, `s`, a msgpack map (cmsgpack, built into Redis): STACK.md and
  bench/README.md measured HMGET of 26 separate fields at ~13 µs, against ~2 µs to fetch `s`
  plus ~2.4 µs to unpack it and ~2.3 µs to pack it. S is that map; `set` marks it dirty.
  Profile fields (tz, em, nm, se, dt, ua:<attr>) stay separate fields, written by identify and
  read by the user endpoints; U holds the ones this call read, `setProfile` marks them dirty.
  Idempotency keys are separate fields too (i:<metric>:<key>), so `s` stays small.
]]
-- Reads `s` and the given profile fields; returns the value of `first` (an idempotency field).
local function loadState(userKey, first, profileFields)
  local vals = rcall('HMGET', userKey, 's', first, unpack(profileFields))
  S = vals[1] and cmsgpack.unpack(vals[1]) or {}
  for i = 1, #profileFields do U[profileFields[i]] = vals[i + 2] end
  return vals[2]
end

local function set(field, value)
  S[field] = value
  stateDirty = true
end

local function num(field)
  return S[field]
end

-- Any profile write forgets `pd`, the digest of the last profile an event applied
-- (user.lua applyProfileText), so the next event compares its fields again.
local function setProfile(field, value)
  U[field] = value
  profileDirty[#profileDirty + 1] = field
  if S.pd then set('pd', nil) end
end

-- `extra` holds further field/value pairs to write in the same HSET (the idempotency key).
local function flushState(userKey, extra)
  local args = extra or {}
  if stateDirty then
    args[#args + 1] = 's'
    args[#args + 1] = cmsgpack.pack(S)
  end
  for i = 1, #profileDirty do
    args[#args + 1] = profileDirty[i]
    args[#args + 1] = U[profileDirty[i]]
  end
  if #args > 0 then rcall('HSET', userKey, unpack(args)) end
end

-- Attribute filter: flat {field, value, field, value...}; every pair must equal the user's value.
local function matches(filter)
  if not filter then return true end
  for i = 1, #filter, 2 do
    if U[filter[i]] ~= filter[i + 1] then return false end
  end
  return true
end
