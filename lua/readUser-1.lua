--[[
  Reads a user's profile fields and keys of the hot state `s` (GET /v1/users/{id}, the
  preferences, the user's boosts). Read-only.

  KEYS[1] user state hash {t:s}:u:<userId>
  ARGV[1] n, the number of profile fields; ARGV[2 .. 1+n] their names; then the state keys,
          each as its index and its name (includes/state-read.lua)

  Reply {0} unknown user | {1, profile values..., state values...} (missing values are nil)
]]
-- @include "includes/state-read.lua"
--@no-writes
--@body
local n = tonumber(ARGV[1])
local vals = redis.call('HMGET', KEYS[1], 's', unpack(ARGV, 2, 1 + n))
if not vals[1] then return { 0 } end
local state = cmsgpack.unpack(vals[1])
local reply = { 1 }
for i = 2, n + 1 do reply[i] = vals[i] or false end
for i = n + 2, #ARGV, 2 do reply[#reply + 1] = stateValue(state, ARGV[i], ARGV[i + 1]) end
return reply
