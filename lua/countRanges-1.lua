--[[
  One shard's members of a sorted set in each score range, on every shard at once
  (--@each-shard: KEYS holds each shard's set in turn, the reply one list of counts per shard).
  Read-only.

  KEYS[1]   the shard's sorted set
  ARGV      pairs: min, max, in ZCOUNT's syntax ("(5" excludes 5, "+inf")

  Reply {count in the first range, count in the second, ...}
]]
--@no-writes
--@body
local rcall = redis.call
--@each-shard
local counts = {}
for i = 1, #ARGV, 2 do counts[#counts + 1] = rcall('ZCOUNT', KEYS[1], ARGV[i], ARGV[i + 1]) end
return counts
