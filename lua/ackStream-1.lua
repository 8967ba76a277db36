--[[
  Acknowledges entries the stream worker applied (lua/applyStream-2.lua), then trims the
  stream to what every consumer group has finished with, so its memory stays bounded.

  The trim bound of a group is its oldest pending entry, or, with nothing pending, its last
  delivered entry; the stream keeps everything from the lowest bound of all groups on
  (XTRIM MINID keeps the bound itself). A group that has read nothing keeps everything.

  KEYS[1] shard stream {t:s}:x
  ARGV[1] consumer group
  ARGV[2 ..] ids to acknowledge

  Reply {acknowledged, trimmed}
]]
-- @include "stream/ids.lua"
--@body
local rcall = redis.call
local stream, group = KEYS[1], ARGV[1]
local acked = 0
if #ARGV > 1 then acked = rcall('XACK', stream, group, unpack(ARGV, 2)) end
local bound
for _, info in ipairs(rcall('XINFO', 'GROUPS', stream)) do
  local f = {}
  for k = 1, #info, 2 do f[info[k]] = info[k + 1] end
  local b = f['last-delivered-id']
  if f['pending'] > 0 then b = rcall('XPENDING', stream, f['name'])[2] end
  if not bound or idCompare(b, bound) < 0 then bound = b end
end
local trimmed = 0
if bound and bound ~= '0-0' then trimmed = rcall('XTRIM', stream, 'MINID', bound) end
return { acked, trimmed }
