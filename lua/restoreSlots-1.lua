--[[
  A running process's state slots written back (src/store/slots-guard.ts): after Redis lost its
  data (a restart without AOF, a FLUSHALL, a failover to an empty replica) the registry is gone
  while the process still writes every user by the positions it read at start. Each of its
  (name, index) pairs is written where the registry has neither the name nor the index, so the
  next process to start registers against these positions instead of numbering its config afresh.

  A name the registry holds at another index, or an index it gives another name, is a conflict:
  another process registered first, and its positions and this one's disagree. Then nothing is
  written (the registry stays the first process's, whole) and the conflicting names are replied:
  the process must stop writing with its positions.

  KEYS[1] registry hash {t}:slots (name -> index, from 1)
  ARGV    name, index, name, index, ...: every name this process knows

  Reply {name, ...}: the names in conflict (empty: the registry agrees, and holds every pair now)
]]
--@body
local rcall = redis.call
local registry = KEYS[1]
local stored = rcall('HGETALL', registry)
local indexOf, nameAt = {}, {}
for i = 1, #stored, 2 do
  indexOf[stored[i]] = stored[i + 1]
  nameAt[stored[i + 1]] = stored[i]
end
local conflicts, missing = {}, {}
for i = 1, #ARGV, 2 do
  local name, index = ARGV[i], ARGV[i + 1]
  local held = indexOf[name]
  if held then
    if held ~= index then conflicts[#conflicts + 1] = name end
  elseif nameAt[index] then
    conflicts[#conflicts + 1] = name
  else
    missing[#missing + 1] = i
  end
end
if #conflicts > 0 then return conflicts end
for _, i in ipairs(missing) do rcall('HSETNX', registry, ARGV[i], ARGV[i + 1]) end
return conflicts
