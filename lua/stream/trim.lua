--[[
  Trims a shard stream to what every consumer group has finished, so its memory stays bounded.
  A group's bound is its oldest pending entry, or, with nothing pending, its last delivered
  entry; the stream keeps everything from the lowest bound of all groups on (XTRIM MINID keeps
  the bound itself). A group that has read nothing keeps everything. `floor`, when given, is one
  bound more (the stream worker's watermark, before its group has caught up with it).
]]
local function trimStream(stream, floor)
  local bound = floor
  for _, info in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
    local f = {}
    for k = 1, #info, 2 do f[info[k]] = info[k + 1] end
    local b = f['last-delivered-id']
    if f['pending'] > 0 then b = redis.call('XPENDING', stream, f['name'])[2] end
    if not bound or idCompare(b, bound) < 0 then bound = b end
  end
  if bound and bound ~= '0-0' then return redis.call('XTRIM', stream, 'MINID', bound) end
  return 0
end
