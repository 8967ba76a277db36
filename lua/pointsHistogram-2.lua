--[[
  One shard's part of GET /v1/points/{key}/summary (trophy-compat §2.2 note #21). Read-only.
  The reader asks for the ranges of the highest total the last summary found, and calls again
  with the ten ranges this call's highest total decides when they differ (src/api/points-summary.ts).

  With a userAttributes filter the users are those of the shard's groups by attribute value
  ({t:s}:uv:<attr>:<value> sets, {t:s}:pa:<sys>:<attr>:<value> totals, kept by the scripts that
  change an attribute or a total): one pair reads that group as it reads the whole shard
  (O(log n) per range); several pairs intersect the groups (O(size of the smallest group)).

  KEYS[1] shard counters        {t:s}:agg (read without a filter)
  KEYS[2] points totals zset    {t:s}:pz:<system> (read without a filter)
  KEYS[1+2i], KEYS[2+2i], for each attribute pair i of the filter (1..n): the group's users
          {t:s}:uv:<attr>:<value> and their totals {t:s}:pa:<system>:<attr>:<value>
  Every key the script reads is declared, all of the shard's slot, as Redis Cluster expects of
  a script (DESIGN.md); the script builds no key name.
  ARGV[1] n, the number of attribute pairs (their keys are KEYS' 2n after the first two)
  ARGV[2 ..] ranges: from, to (inclusive)

  Reply {users of the shard (in the filter), users with a total >= 1, highest total (0 if none), count per range...}

  Called on every shard at once (--@each-shard perShard: KEYS are each shard's 2 + 2n in turn,
  the reply one of these per shard).
]]
--@no-writes
--@body
local rcall = redis.call
local pairs = tonumber(ARGV[1])
local perShard = 2 + 2 * pairs

local function rangeCounts(reply, countIn)
  for i = 2, #ARGV, 2 do reply[#reply + 1] = countIn(tonumber(ARGV[i]), tonumber(ARGV[i + 1])) end
  return reply
end
--@each-shard perShard

if pairs <= 1 then
  local users, zset
  if pairs == 0 then
    users, zset = tonumber(rcall('HGET', KEYS[1], 'users') or '0'), KEYS[2]
  else
    users, zset = rcall('SCARD', KEYS[3]), KEYS[4]
  end
  local top = rcall('ZREVRANGE', zset, 0, 0, 'WITHSCORES')
  return rangeCounts({ users, rcall('ZCOUNT', zset, 1, '+inf'), top[2] and tonumber(top[2]) or 0 }, function(from, to)
    return rcall('ZCOUNT', zset, from, to)
  end)
end

local sets, zsets = {}, {}
for i = 3, 2 + 2 * pairs, 2 do
  sets[#sets + 1] = KEYS[i]
  zsets[#zsets + 1] = KEYS[i + 1]
end
local users = rcall('SINTERCARD', #sets, unpack(sets))
-- unpack only expands as the last argument: build the argument list.
local args = { #zsets }
for _, key in ipairs(zsets) do args[#args + 1] = key end
args[#args + 1] = 'AGGREGATE'
args[#args + 1] = 'MAX'
args[#args + 1] = 'WITHSCORES'
local both = rcall('ZINTER', unpack(args))
local totals, withPoints, max = {}, 0, 0
for i = 2, #both, 2 do
  local total = tonumber(both[i])
  totals[#totals + 1] = total
  if total >= 1 then withPoints = withPoints + 1 end
  if total > max then max = total end
end
return rangeCounts({ users, withPoints, max }, function(from, to)
  local n = 0
  for _, total in ipairs(totals) do
    if total >= from and total <= to then n = n + 1 end
  end
  return n
end)
