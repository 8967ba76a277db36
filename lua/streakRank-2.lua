--[[
  How many users of one shard hold an ACTIVE streak longer than `length` (the `rank` of
  GET /v1/users/{id}/streak: 1 + the sum over shards). Read-only.

  ZCOUNT on {t:s}:sa counts every entry above the length; the lost streaks not yet settled
  (sd <= now) are then taken back out. O(log n + lost streaks awaiting settlement); more than
  `cap` of those and the shard answers -1 (the rank is then unknown, and reported as null).

  KEYS[1] {t:s}:sa
  KEYS[2] {t:s}:sd
  ARGV[1] now, ms
  ARGV[2] length
  ARGV[3] cap

  Reply count | -1
]]
--@no-writes
--@body
local rcall = redis.call
local length, cap = tonumber(ARGV[2]), tonumber(ARGV[3])
local above = rcall('ZCOUNT', KEYS[1], '(' .. length, '+inf')
local lost = rcall('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, cap + 1)
if #lost > cap then return -1 end
if #lost > 0 then
  local lengths = rcall('ZMSCORE', KEYS[1], unpack(lost))
  for i = 1, #lost do
    if lengths[i] and tonumber(lengths[i]) > length then above = above - 1 end
  end
end
return above
