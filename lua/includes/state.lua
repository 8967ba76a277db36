--[[
  The user's state hash, read once with HMGET and written once with HSET.
  S holds the values (strings as read, numbers once set); `set` records a field as dirty so
  that flushState writes each changed field exactly once.
]]
local S = {}
local dirty, dirtyOrder = {}, {}

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
