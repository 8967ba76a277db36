--[[
  The tenant's state slots (src/store/state-slots.ts): gives every name not yet registered the
  next index, atomically, and replies the whole registry. Indexes never change and are never
  reused, so every process, whatever config it runs, reads a user's state array alike: a name
  registered by a newer config is only a position an older process keeps as it found it.

  The next index is the largest registered one plus one, not the count of names: a registry with
  a gap (a name deleted by hand) would otherwise give a new name an index another name holds in
  the stored states. Run once per tenant at start, so reading every index costs nothing that matters.

  KEYS[1] registry hash {t}:slots (name -> index, from 1)
  ARGV    the names this process uses, in order

  Reply {name, index, name, index, ...}: every registered name
]]
--@body
local rcall = redis.call
local registry = KEYS[1]
local known = rcall('HMGET', registry, unpack(ARGV))
local next = 0
local indexes = rcall('HVALS', registry)
for i = 1, #indexes do
  local index = tonumber(indexes[i])
  if index > next then next = index end
end
for i = 1, #ARGV do
  if not known[i] then
    next = next + 1
    rcall('HSET', registry, ARGV[i], next)
  end
end
return rcall('HGETALL', registry)
