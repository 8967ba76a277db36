--[[
  The webhook consumer's read (src/jobs/webhooks/consumer.ts): the next records of one shard
  stream for its consumer group, of which only those that may stand for a subscribed event
  reach Node. The others are acknowledged here, in the same call. On a tenant whose endpoints
  want the milestones (levels, achievements, streaks) most records stand for none, and reading
  each into Node to find that out cost the service's process ~25 µs a record (bench/README.md).

  A CONSERVATIVE filter: it keeps every record that kinds.ts (recordEvents, the one place that
  decides which events a record stands for) could turn into a subscribed event, and may keep a
  few that it turns into none (a points part with nothing added, for example). Kept records go
  on as an ordinary read would: pending in this consumer until Node acknowledges them; a crash
  leaves them pending and they are taken over as before.

  What each wanted part means (outcome parts, src/domain/stream-record.ts):
    a    a part "a:..."                              achievement.completed
    p    a part "p:..."                              points.changed
    L    a part "p:sys:added:total:lvBefore:lvAfter" with lvBefore ~= lvAfter   points.level_changed
    s    a part "s:..."                              streak.extended
    S    the part "s:1"                              streak.started
    sl   a part "sl:..."                             streak.lost
    fc   a part "fc:..."                             streak.freeze_consumed
    fe   a part "fe:..." or "fa:..."                 streak.freeze_earned
    b    a part "b:..."                              leaderboard.rank_changed
  A user boost's record (kind "ub") is always kept: it schedules the boost's start and finish.

  KEYS[1] shard stream {t:s}:x
  ARGV[1] consumer group
  ARGV[2] consumer
  ARGV[3] n, the most records to read
  ARGV[4 ..] the wanted parts (above)

  Reply {read, last | false, id, fields, id, fields, ...}: the number of records read; the last
  one's id (the consumer waits for records after it, XREAD BLOCK); then the kept records as
  XREADGROUP gives them.
]]
-- @include "stream/ids.lua"
-- @include "stream/trim.lua"
--@body
local rcall = redis.call
local stream, group, consumer, n = KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3])

local want = {}
for w = 4, #ARGV do want[ARGV[w]] = true end

-- ";" before and after the parts: each part is then found as ";<prefix>" with a plain find.
local function wanted(parts)
  if want.a and string.find(parts, ';a:', 1, true) then return true end
  if want.p and string.find(parts, ';p:', 1, true) then return true end
  if want.L then
    for before, after in string.gmatch(parts, ';p:[^:;]*:[^:;]*:[^:;]*:([^:;]*):([^:;]*)') do
      if before ~= after then return true end
    end
  end
  if want.s and string.find(parts, ';s:', 1, true) then return true end
  if want.S and string.find(parts, ';s:1;', 1, true) then return true end
  if want.sl and string.find(parts, ';sl:', 1, true) then return true end
  if want.fc and string.find(parts, ';fc:', 1, true) then return true end
  if want.fe and (string.find(parts, ';fe:', 1, true) or string.find(parts, ';fa:', 1, true)) then return true end
  if want.b and string.find(parts, ';b:', 1, true) then return true end
  return false
end

local got = rcall('XREADGROUP', 'GROUP', group, consumer, 'COUNT', n, 'STREAMS', stream, '>')
local entries = got and got[1] and got[1][2] or {}
local reply, done = { #entries, entries[#entries] and entries[#entries][1] or false }, {}
for e = 1, #entries do
  local fields = entries[e][2]
  -- Every writer XADDs k, u, t, z, e, o in this order: read by position when the names are there.
  local kind, outcome
  if fields[1] == 'k' and fields[11] == 'o' then
    kind, outcome = fields[2], fields[12]
  else
    outcome = ''
    for j = 1, #fields, 2 do
      if fields[j] == 'k' then kind = fields[j + 1] elseif fields[j] == 'o' then outcome = fields[j + 1] end
    end
  end
  if kind == 'ub' or wanted(';' .. outcome .. ';') then
    reply[#reply + 1] = entries[e][1]
    reply[#reply + 1] = fields
  else
    done[#done + 1] = entries[e][1]
  end
end
if #done > 0 then
  rcall('XACK', stream, group, unpack(done))
  trimStream(stream, nil)
end
return reply
