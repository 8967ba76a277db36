--[[
  Hot-state keys and profile fields of several users (GET /v1/streaks). Read-only. On a Redis
  Cluster node the users of one shard a call; on a standalone Redis, which runs a script on keys
  of any slots, every user in one call (src/store/cross-shard.ts).

  KEYS[1] a shard's counters {t:s}:agg: names the users' slot so the call is routed there
          (Redis Cluster); not read
  ARGV[1] ns, the number of state keys; ARGV[2 .. 1+2ns] the keys, each as its index and its
          name (includes/state-read.lua)
  ARGV[2+2ns] nf, the number of profile fields; then the fields
  then the users' state hashes {t:s}:u:<userId> (on a Cluster node, all of KEYS[1]'s shard)

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
local first = 3 + 2 * ns + nf
local reply, n = {}, 0
for u = first, #ARGV do
  local vals = rcall('HMGET', ARGV[u], 's', unpack(ARGV, 3 + 2 * ns, 2 + 2 * ns + nf))
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
