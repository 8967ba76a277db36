--[[
  Holds a coalesced outbound event until its window closes (src/jobs/webhooks/coalesce.ts):
  keeps the first and the last change of the window, by stream id, whatever order the
  consumers process the records in.

  Steps
    1. HGET "<key>|f"; HSET it when absent or when this change's stream id is lower.
    2. HGET "<key>|l"; HSET it when absent or when this change's stream id is higher.
    3. ZADD NX the key with the instant its window closes.

  KEYS[1] coalesced events   {t}:wh:co    (hash)
  KEYS[2] windows by close   {t}:wh:cod   (zset)

  ARGV[1] coalesce key "<endpoint>|<type>|<user>|<subject>|<window>"
  ARGV[2] the change's stream id
  ARGV[3] instant (ms, service clock) the window closes
  ARGV[4] the payload (JSON, without id)

  Reply 1. A replay of the same change is a no-op (same id: neither lower nor higher).
]]
-- @include "stream/ids.lua"
--@body
local rcall = redis.call
local hash, due = KEYS[1], KEYS[2]
local key, id, closes, payload = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local value = id .. ' ' .. payload

local function idOf(stored)
  return string.match(stored, '^(%S+)')
end

local first = rcall('HGET', hash, key .. '|f')
if not first or idCompare(id, idOf(first)) < 0 then rcall('HSET', hash, key .. '|f', value) end
local last = rcall('HGET', hash, key .. '|l')
if not last or idCompare(id, idOf(last)) > 0 then rcall('HSET', hash, key .. '|l', value) end
rcall('ZADD', due, 'NX', closes, key)
return 1
