--[[
  A consumer group's lag on one stream of a shard, for GET /metrics: the stream worker's on the
  shard stream, the webhook consumer's on the hook stream. Read-only.

  KEYS[1] shard stream {t:s}:x, or hook stream {t:s}:xh
  ARGV[1] consumer group

  Reply {length, pending, lag | -1, oldest unprocessed id | false, Redis time ms}
    length   entries in the stream (XLEN; trimmed as its groups acknowledge)
    pending  delivered to a consumer and not yet acknowledged
    lag      not yet delivered (Redis 7 XINFO lag; -1 when Redis cannot tell)
    oldest   the oldest pending entry, else the first undelivered one; its id's ms part is the
             Redis time it was added, compared with the Redis time of this call for its age
]]
--@no-writes
--@body
local rcall = redis.call
local stream, group = KEYS[1], ARGV[1]
local length = rcall('XLEN', stream)
local pending, lag, last = 0, length, '0-0'
if length > 0 or rcall('EXISTS', stream) == 1 then
  for _, info in ipairs(rcall('XINFO', 'GROUPS', stream)) do
    local f = {}
    for k = 1, #info, 2 do f[info[k]] = info[k + 1] end
    if f['name'] == group then
      pending, last = f['pending'], f['last-delivered-id']
      lag = f['lag'] or -1
    end
  end
end
local oldest = false
if pending > 0 then
  oldest = rcall('XPENDING', stream, group)[2]
else
  local first = rcall('XRANGE', stream, '(' .. last, '+', 'COUNT', 1)[1]
  if first then oldest = first[1] end
end
local t = rcall('TIME')
return { length, pending, lag, oldest, tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) }
