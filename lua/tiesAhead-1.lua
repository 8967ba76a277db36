--[[
  How many entries of one shard's set of a run share `value` with (value, member) and rank ahead
  of it (they reached the value first: a greater member). Read-only. Node reads each shard's
  first TIE_PAGE equal values itself and counts there; it calls this script only for a shard
  where more equal values than that rank ahead (src/store/leaderboard-store.ts shardPlaces),
  so reading them all would cost O(ties): here O(log n × log ties) (includes/board-order.lua).

  KEYS[1] the run's set on the shard  {t:s}:lb:<board>:<run>[:<group>]
  ARGV[1] the value, as a score's text
  ARGV[2] the member

  Reply the count
]]
-- @include "includes/board-order.lua"
--@no-writes
--@body
local key, value = KEYS[1], ARGV[1]
return tiesAhead(key, redis.call('ZCOUNT', key, '(' .. value, '+inf'), value, ARGV[2])
