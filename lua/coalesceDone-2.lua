--[[
  Forgets coalesced events whose delivery was queued (src/jobs/webhooks/coalesce.ts), unless a
  change arrived for the window after it was read: then it stays and the next flush queues it
  again under the same event id (a receiver sees at most that id once more).

  KEYS[1] coalesced events   {t}:wh:co    (hash)
  KEYS[2] windows by close   {t}:wh:cod   (zset)

  ARGV[1 ..] triples: coalesce key, first and last values as read ("<stream id> <payload>")

  Reply the number of keys forgotten.
]]
--@body
local rcall = redis.call
local hash, due = KEYS[1], KEYS[2]
local done = 0
for i = 1, #ARGV, 3 do
  local key = ARGV[i]
  local held = rcall('HMGET', hash, key .. '|f', key .. '|l')
  if (held[1] or '') == ARGV[i + 1] and (held[2] or '') == ARGV[i + 2] then
    rcall('HDEL', hash, key .. '|f', key .. '|l')
    rcall('ZREM', due, key)
    done = done + 1
  end
end
return done
