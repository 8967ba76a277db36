--[[
  One shard's part of GET /v1/points/{key}/summary (trophy-compat §2.2 note #21). Read-only.
  The reader calls it twice: once without ranges (to learn the highest total of the tenant),
  then with the ten ranges that highest total decides.

  KEYS[1] shard counters        {t:s}:agg
  KEYS[2] points totals zset    {t:s}:pz:<system>
  ARGV    pairs: from, to (inclusive)

  Reply {users of the shard, users with a total >= 1, highest total (0 if none), count per range...}
]]
--@body
local rcall = redis.call
local top = rcall('ZREVRANGE', KEYS[2], 0, 0, 'WITHSCORES')
local reply = {
  tonumber(rcall('HGET', KEYS[1], 'users') or '0'),
  rcall('ZCOUNT', KEYS[2], 1, '+inf'),
  top[2] and tonumber(top[2]) or 0,
}
for i = 1, #ARGV, 2 do reply[#reply + 1] = rcall('ZCOUNT', KEYS[2], ARGV[i], ARGV[i + 1]) end
return reply
