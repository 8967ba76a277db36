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

  KEYS     the run's set on each shard  {t:s}:lb:<board>:<run>[:<group>]
  ARGV[1]  the value, as a score's text
  ARGV[2]  the member

  Reply {above, ahead} of each shard in turn, flat
]]
-- @include "includes/board-order.lua"
--@no-writes
--@body
local value, member = ARGV[1], ARGV[2]
local higher = '(' .. value
local reply = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local above = redis.call('ZCOUNT', key, higher, '+inf')
  reply[2 * i - 1] = above
  reply[2 * i] = tiesAhead(key, above, value, member)
end
return reply
