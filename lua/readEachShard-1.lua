--[[
  One read command on one shard's key, on every shard at once (--@each-shard: KEYS holds each
  shard's key in turn, the reply is one reply per shard, in order): a cross-shard read of plain
  commands (S × HMGET, S × ZCOUNT, ...) as one call instead of S (src/store/cross-shard.ts).
  Read-only: the function is registered no-writes, so Redis refuses any writing command here.

  KEYS[1]    the shard's key
  ARGV[1]    the command (HMGET, ZCOUNT, ZCARD, ZREVRANGE, ZRANGEBYSCORE)
  ARGV[2 ..] its arguments after the key, the same on every shard

  Reply the command's reply
]]
--@no-writes
--@body
local rcall, command = redis.call, ARGV[1]
--@each-shard
return rcall(command, KEYS[1], unpack(ARGV, 2))
