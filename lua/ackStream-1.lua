--[[
  Acknowledges entries a consumer group finished (src/jobs/stream-group.ts), then trims the
  stream to what every consumer group has finished (stream/trim.lua).

  KEYS[1] shard stream {t:s}:x
  ARGV[1] consumer group
  ARGV[2 ..] ids to acknowledge

  Reply {acknowledged, trimmed}
]]
-- @include "stream/ids.lua"
-- @include "stream/trim.lua"
--@body
local rcall = redis.call
local stream, group = KEYS[1], ARGV[1]
local acked = 0
if #ARGV > 1 then acked = rcall('XACK', stream, group, unpack(ARGV, 2)) end
return { acked, trimStream(stream, nil) }
