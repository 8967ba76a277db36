--[[
  Where entries (value, member) fall on each given shard's set of a run: for each, the entries
  above its value, and those of exactly its value ranked ahead of it (they reached it first: a
  greater member). Read-only. The entries themselves need not be stored. What a user's rank and
  the page around a user need (src/store/leaderboard-store.ts shardPlaces), for every request of
  one batch that asks about the board (ReadsInBatch.gather): one call for all of them.

  One call for every shard on a standalone Redis (one a shard on a Cluster node), and counts
  only: the equal values are compared here (includes/board-order.lua tiesAhead: a page of them
  read at once when few, positions bisected when many), where the service used to read each
  shard's first 64 equal members itself (1 024 strings a read of 16 shards where many users share
  a value, as on a new board), then asked a script on each shard holding more. Entries of one
  value share what does not depend on the member: the count above it and, on each shard, the first
  page of its equal values, their count and the last of them (a new board's users all share one);
  and each member's bisection is bounded by the places of the members around it (placeMembers).

  With a board's size (ARGV[1] > 0), the entries above each value are counted on every shard
  first, and an entry with at least that many above is off the board: its part of the reply is
  -1 and no place among equal values is read for it (most users of a large board are off it). A
  standalone Redis is given every shard, so this settles it in the same round trip; a Cluster
  node, given one shard a call, is given 0 and the service counts first
  (src/store/leaderboard-store.ts placeOnBoard).

  KEYS     the run's set on each shard  {t:s}:lb:<board>:<run>[:<group>]
  ARGV[1]  the board's size (maxParticipants), or 0
  ARGV[2], ARGV[3], ...  each entry's value (a score's text) and member, entry after entry

  Reply, flat, entry after entry: -1 (off the board), or 0 then each shard's `above, ahead`
]]
-- @include "includes/board-order.lua"
--@no-writes
--@body
local size = tonumber(ARGV[1])
local call = redis.call
local shards = #KEYS
-- Per distinct value: the entries above it on each shard, their sum, each shard's `seen`, and
-- the positions in ARGV of its members.
local byValue, values = {}, {}
for i = 2, #ARGV, 2 do
  local value = ARGV[i]
  local counted = byValue[value]
  if not counted then
    local higher = '(' .. value
    local above, seen, total = {}, {}, 0
    for s = 1, shards do
      local count = call('ZCOUNT', KEYS[s], higher, '+inf')
      above[s], seen[s] = count, {}
      total = total + count
    end
    counted = { above = above, seen = seen, off = size > 0 and total >= size, members = {} }
    byValue[value] = counted
    values[#values + 1] = value
  end
  counted.members[#counted.members + 1] = i + 1
end
local byMember = function(a, b) return memberAfter(ARGV[a], ARGV[b]) end
-- Each entry's count ahead on each shard, by its member's position in ARGV.
local ahead = {}
-- The members members[first..last] (greatest first) of one value on one shard, each one's count
-- of equal values ahead between `floor` and `ceiling`: the middle one first, then each half
-- within what it found (a greater member has at most as many ahead, a lesser one at least), so
-- that k members among t equal values take about k × log(t / k) bisection steps, not k × log t.
local function placeMembers(key, above, value, members, first, last, seen, s, floor, ceiling)
  if first > last then return end
  local middle = first + (last - first - (last - first) % 2) / 2
  seen.floor, seen.ceiling = floor, ceiling
  local count = tiesAhead(key, above, value, ARGV[members[middle]], seen)
  ahead[members[middle]][s] = count
  placeMembers(key, above, value, members, first, middle - 1, seen, s, floor, count)
  placeMembers(key, above, value, members, middle + 1, last, seen, s, count, ceiling)
end
for v = 1, #values do
  local counted = byValue[values[v]]
  if not counted.off then
    local members = counted.members
    table.sort(members, byMember)
    for _, at in ipairs(members) do ahead[at] = {} end
    for s = 1, shards do
      placeMembers(KEYS[s], counted.above[s], values[v], members, 1, #members, counted.seen[s], s, nil, nil)
    end
  end
end
local reply, n = {}, 0
for i = 2, #ARGV, 2 do
  local counted = byValue[ARGV[i]]
  n = n + 1
  if counted.off then
    reply[n] = -1
  else
    reply[n] = 0
    local above, counts = counted.above, ahead[i + 1]
    for s = 1, shards do
      reply[n + 1], reply[n + 2] = above[s], counts[s]
      n = n + 2
    end
  end
end
return reply
