--[[
  Where an entry (value, member) falls on each given shard's set of a run: the entries above its
  value, and those of exactly its value ranked ahead of it (they reached it first: a greater
  member). Read-only. The entry itself need not be stored. What a user's rank and the page
  around a user need (src/store/leaderboard-store.ts shardPlaces).

  One call for every shard on a standalone Redis (one a shard on a Cluster node), and counts
  only: the equal values are compared here (includes/board-order.lua tiesAhead: a page of them
  read at once when few, positions bisected when many), where the service used to read each
  shard's first 64 equal members itself (1 024 strings a read of 16 shards where many users share
  a value, as on a new board), then asked a script on each shard holding more.

  With a board's size (ARGV[3] > 0), the entries above are counted on every shard first, and an
  entry with at least that many above is off the board: the reply is {-1} and no place among
  equal values is read (most users of a large board are off it). A standalone Redis is given
  every shard, so this settles it in the same round trip; a Cluster node, given one shard a call,
  is given 0 and the service counts first (src/store/leaderboard-store.ts placeOnBoard).

  KEYS     the run's set on each shard  {t:s}:lb:<board>:<run>[:<group>]
  ARGV[1]  the value, as a score's text
  ARGV[2]  the member
  ARGV[3]  the board's size (maxParticipants), or 0

  Reply {above, ahead} of each shard in turn, flat | {-1}
]]
-- @include "includes/board-order.lua"
--@no-writes
--@body
local value, member, size = ARGV[1], ARGV[2], tonumber(ARGV[3])
local higher = '(' .. value
local reply, total = {}, 0
for i = 1, #KEYS do
  local above = redis.call('ZCOUNT', KEYS[i], higher, '+inf')
  reply[2 * i - 1] = above
  total = total + above
end
if size > 0 and total >= size then return { -1 } end
for i = 1, #KEYS do reply[2 * i] = tiesAhead(KEYS[i], reply[2 * i - 1], value, member) end
return reply
