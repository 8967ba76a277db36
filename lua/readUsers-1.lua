--[[
  Hot-state keys and profile fields of several users (GET /v1/streaks). Read-only. On a Redis
  Cluster node the users of one shard a call; on a standalone Redis, which runs a script on keys
  of any slots, every user in one call (src/store/cross-shard.ts).

  KEYS    the users' state hashes {t:s}:u:<userId>, at least one (on a Cluster node, all of
          one shard): every key the script reads is declared, as Redis Cluster expects of a
          script (DESIGN.md); the call is routed by them
  ARGV[1] ns, the number of state keys; ARGV[2 .. 1+2ns] the keys, each as its index and its
          name (includes/state-read.lua)
  ARGV[2+2ns] nf, the number of profile fields; then the fields

  Reply, flat, user after user: 0 (unknown user) | 1, then the state values, then the field
  values (absent: false). Flat: Redis converts each Lua table of a reply with ~5k instructions,
  and a table per user and two inside it cost more than reading the user (bench/README.md, the
  fiftieth stop).
]]
-- @include "includes/state-read.lua"
--@no-writes
--@body
local rcall = redis.call
local ns = tonumber(ARGV[1])
local nf = tonumber(ARGV[2 + 2 * ns])
local reply, n = {}, 0
for u = 1, #KEYS do
  local vals = rcall('HMGET', KEYS[u], 's', unpack(ARGV, 3 + 2 * ns, 2 + 2 * ns + nf))
  n = n + 1
  if not vals[1] then
    reply[n] = 0
  else
    reply[n] = 1
    local state = cmsgpack.unpack(vals[1])
    for k = 1, ns do reply[n + k] = stateValue(state, ARGV[2 * k], ARGV[2 * k + 1]) end
    n = n + ns
    for k = 1, nf do reply[n + k] = vals[k + 1] end
    n = n + nf
  end
end
return reply
