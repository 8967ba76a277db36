--[[
  The user's state hash ({t:s}:u:<user>), read once with HMGET and written once with HSET.
  S holds the values (strings as read, numbers once set); `set` marks a field dirty so that
  flushState writes each changed field exactly once. Batch scripts call loadState per user.
]]
local S = {}
local dirty, dirtyOrder = {}, {}

local function loadState(userKey, fields, first)
  S, dirty, dirtyOrder = {}, {}, {}
  local vals = rcall('HMGET', userKey, first, unpack(fields))
  for i = 1, #fields do S[fields[i]] = vals[i + 1] end
  return vals[1]
end

local function set(field, value)
  S[field] = value
  if not dirty[field] then
    dirty[field] = true
    dirtyOrder[#dirtyOrder + 1] = field
  end
end

local function num(field)
  return tonumber(S[field])
end

local function flushState(userKey)
  if #dirtyOrder == 0 then return end
  local args = {}
  for i = 1, #dirtyOrder do
    local f = dirtyOrder[i]
    local v = S[f]
    if type(v) == 'number' then v = string.format('%.17g', v) end
    args[#args + 1] = f
    args[#args + 1] = v
  end
  rcall('HSET', userKey, unpack(args))
end

-- Attribute filter: flat {field, value, field, value...}; every pair must equal the user's value.
local function matches(filter)
  if not filter then return true end
  for i = 1, #filter, 2 do
    if S[filter[i]] ~= filter[i + 1] then return false end
  end
  return true
end
