--[[
  How many users of one shard hold an ACTIVE streak longer than `length` (the `rank` of
  GET /v1/users/{id}/streak: 1 + the sum over shards). Read-only.

  ZCOUNT on {t:s}:sa counts every entry above the length; the lost streaks not yet settled
  (sd <= now), when there are any, are then taken back out. O(log n + lost streaks awaiting
  settlement); more than `cap` of those and the shard answers -1 (the rank is then unknown, and
  reported as null). Called on every shard at once (--@each-shard: KEYS are each shard's two in
  turn, the reply one count per shard): in Redis's CPU no dearer than the two plain ZCOUNTs a
  shard it replaced (bench/README, the forty-sixth stop), in the service's a quarter of them.

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
local now, length, cap = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local longer = '(' .. length
--@each-shard
local above = rcall('ZCOUNT', KEYS[1], longer, '+inf')
-- Most shards hold no lost streak awaiting settlement (the expiry sweep settles them within a
-- tick: src/jobs/streak-expiry.ts): a count says so for less than the range read.
if rcall('ZCOUNT', KEYS[2], '-inf', now) == 0 then return above end
local lost = rcall('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, cap + 1)
if #lost > cap then return -1 end
if #lost > 0 then
  local lengths = rcall('ZMSCORE', KEYS[1], unpack(lost))
  for i = 1, #lost do
    if lengths[i] and tonumber(lengths[i]) > length then above = above - 1 end
  end
end
return above
