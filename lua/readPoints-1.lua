--[[
  The metering read's second call: a user's total in one points system and the most recent
  awards (GET /v1/users/{id}/points/{key}). Read-only. The read starts with a plain LRANGE of
  the award list (its newest record carries the total); this script runs only when that list
  is empty, to tell a user with no award in the system from an unknown one.

  KEYS[1] user state hash {t:s}:u:<userId>
  ARGV[1] key prefix {t:s}:
  ARGV[2] user id
  ARGV[3] points system key
  ARGV[4] number of awards wanted (1..100)

  Reply
    {0}                          unknown user
    {1, total, award...}         award = "seq|ms|awarded|totalAfter|triggerKey", newest first
]]
local rcall = redis.call
local blob = rcall('HGET', KEYS[1], 's')
if not blob then return { 0 } end
local state = cmsgpack.unpack(blob)
local reply = { 1, state['p:' .. ARGV[3]] or 0 }
local awards = rcall('LRANGE', ARGV[1] .. 'aw:' .. ARGV[3] .. ':' .. ARGV[2], 0, tonumber(ARGV[4]) - 1)
for i = 1, #awards do reply[#reply + 1] = awards[i] end
return reply
