--[[
  One shard's longest ACTIVE streaks (GET /v1/streaks/rankings?type=active). Read-only.

  {t:s}:sa holds users by current length, {t:s}:sd the instant each streak is lost; an entry
  whose instant has passed (sd <= now) is a lost streak its user has not settled yet, and is
  skipped. Reads sa from the top in chunks until `limit` active streaks are found: the work is
  O(log n + limit + lost streaks ranked above them), and at most `cap` entries are examined.

  KEYS[1] {t:s}:sa
  KEYS[2] {t:s}:sd
  ARGV[1] now, ms (the service clock)
  ARGV[2] limit
  ARGV[3] cap, the most entries examined

  Reply {complete 1|0, user, length, user, length, ...} by length descending, then user id
        descending (Redis' order for equal scores); complete is 0 when the cap stopped the scan

  Called on every shard at once (--@each-shard: KEYS are each shard's two in turn, the reply
  one of these per shard).
]]
--@no-writes
--@body
local rcall = redis.call
local now, limit, cap = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local chunk = limit + 16
--@each-shard
local found, reply = 0, { 1 }
local start = 0
while found < limit do
  if start >= cap then
    reply[1] = 0
    break
  end
  local page = rcall('ZREVRANGE', KEYS[1], start, start + chunk - 1, 'WITHSCORES')
  if #page == 0 then break end
  local members = {}
  for i = 1, #page, 2 do members[#members + 1] = page[i] end
  local deadlines = rcall('ZMSCORE', KEYS[2], unpack(members))
  for i = 1, #members do
    local d = deadlines[i]
    if found < limit and (not d or tonumber(d) > now) then
      found = found + 1
      reply[#reply + 1] = members[i]
      reply[#reply + 1] = tonumber(page[2 * i])
    end
  end
  start = start + chunk
end
return reply
