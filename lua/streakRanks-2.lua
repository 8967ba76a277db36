--[[
  For each of several lengths, how many users of the given shards hold an ACTIVE streak longer
  than it: the `rank` of GET /v1/users/{id}/streak is 1 + that count over every shard. Read-only.
  One call answers every streak read of a batch (src/store/read-store.ts streakRank gathers
  their lengths: reads-in-batch.ts gather), so what a shard costs once (its lost streaks) is paid
  once a batch, and each distinct length costs one ZCOUNT a shard.

  ZCOUNT on {t:s}:sa counts every entry above a length; the lost streaks not yet settled
  (sd <= now), when there are any, are then taken back out. O(lengths × log n + lost streaks
  awaiting settlement × lengths); more than `cap` of those on a shard and the reply is the single
  value -1 (the ranks are then unknown, and reported as null).

  The shards' counts are summed here into one flat array: a nested table a shard (as
  --@each-shard replies) costs Redis ~5k instructions each to convert. A standalone Redis is
  given every shard in one call; a Cluster node one shard a call, whose counts Node adds up.

  The asking users are not counted above themselves: a user whose streak was read at a length
  and extended before this call holds a longer active streak here, and was counted as one of the
  users ahead of them (rank 2 with nobody else on the tenant's streaks). For each asking user the
  reply says whether their own entry was counted in their length's count (ahead of their length,
  and not taken out as a lost streak awaiting settlement), which the caller subtracts.

  KEYS     {t:s}:sa, {t:s}:sd of each shard in turn
  ARGV[1]  now, ms
  ARGV[2]  cap
  ARGV[3]  n, the number of lengths; ARGV[4 .. 3+n] the lengths
  ARGV[4+n] the asking users' positions, two little-endian uint16 a user (struct): their shard's
           among KEYS' shards and their length's among the lengths, both 1-based. Binary because
           an argument costs ~1k instructions and a `tonumber` ~1.8k: three arguments a user
           made a streak read's rank ~3-5 µs dearer in Redis (bench/README.md, "The fifty-sixth stop").
  ARGV[5+n ..] the asking users' ids, in the same order

  Reply {count for the first length, ..., count for the n-th length, then for each asking user 1
        (their own entry counted) or 0} | {-1}
]]
--@no-writes
--@body
local rcall = redis.call
local now, cap = ARGV[1], tonumber(ARGV[2])
local lengths, above, n = {}, {}, tonumber(ARGV[3])
for i = 1, n do
  lengths[i] = tonumber(ARGV[i + 3])
  above[i] = 0
end
-- The asking users' own entries: counted above their length, unless lost awaiting settlement
-- (then taken back out below with the others).
local own = {}
local positions, at = ARGV[4 + n], 1
for u = 5 + n, #ARGV do
  local shardAt, lengthAt
  shardAt, lengthAt, at = struct.unpack('<HH', positions, at)
  local base = (shardAt - 1) * 2
  local user, length = ARGV[u], lengths[lengthAt]
  local held = rcall('ZSCORE', KEYS[base + 1], user)
  local counted = 0
  if held and tonumber(held) > length then
    local deadline = rcall('ZSCORE', KEYS[base + 2], user)
    if not (deadline and tonumber(deadline) <= tonumber(now)) then counted = 1 end
  end
  own[#own + 1] = counted
end
for base = 0, #KEYS - 2, 2 do
  local active, deadlines = KEYS[base + 1], KEYS[base + 2]
  for i = 1, n do above[i] = above[i] + rcall('ZCOUNT', active, '(' .. ARGV[i + 3], '+inf') end
  -- Most shards hold no lost streak awaiting settlement (the expiry sweep settles them within a
  -- tick: src/jobs/streak-expiry.ts): a count says so for less than the range read.
  if rcall('ZCOUNT', deadlines, '-inf', now) > 0 then
    local lost = rcall('ZRANGEBYSCORE', deadlines, '-inf', now, 'LIMIT', 0, cap + 1)
    if #lost > cap then return { -1 } end
    local lostLengths = rcall('ZMSCORE', active, unpack(lost))
    for j = 1, #lost do
      local held = lostLengths[j] and tonumber(lostLengths[j])
      if held then
        for i = 1, n do
          if held > lengths[i] then above[i] = above[i] - 1 end
        end
      end
    end
  end
end
for u = 1, #own do above[n + u] = own[u] end
return above
