--[[
  A count on one shard's key (ZCOUNT, ZCARD), on every shard at once (--@each-shard: KEYS holds
  each shard's key in turn, the reply is one count per shard, in order): a cross-shard count as
  one call instead of S (src/store/cross-shard.ts). Counts only: a reply of strings (HMGET,
  ZREVRANGE WITHSCORES) costs Redis half again to twice as much read through a script as sent
  plain (each string made a Lua string, then written back), so those stay plain commands;
  an integer costs the same either way. Read-only: the function is registered no-writes.

  KEYS[1]    the shard's key
  ARGV[1]    the command: ZCOUNT or ZCARD
  ARGV[2 ..] its arguments after the key, the same on every shard

  Reply the count
]]
--@no-writes
--@body
local rcall, command = redis.call, ARGV[1]
--@each-shard
return rcall(command, KEYS[1], unpack(ARGV, 2))
