--[[
  The reads of one user-scoped endpoint in one call (event summaries, the user's metrics,
  achievements, streak and wrapped): a short plan of reads on the user's shard. Read-only.

  KEYS[1]     user state hash {t:s}:u:<userId>
  KEYS[2..]   the keys the steps read, one per Z, R, H and O step, in the steps' order (a key
              read by two steps is passed twice). Every key a script touches is in KEYS, each
              with the user's hash tag {t:s} (src/store/keys.ts builds them), so that the call
              names its one slot, as Redis Cluster requires of a script (DESIGN.md); a key in
              ARGV is never declared, which a standalone Redis and a one-node Cluster let pass.
  ARGV    steps, each an op code and its arguments (src/store/read-plan.ts builds them):
    S n i1 k1..in kn      keys of the hot state `s`, each as its index and its name
                          (includes/state-read.lua)
    F n f1..fn            fields of the user hash (profile, attributes)
    Z min max limit       ZRANGEBYSCORE key min max LIMIT 0 limit
    R max min limit       ZREVRANGEBYSCORE key max min LIMIT 0 limit
    H n f1..fn            HMGET of a shard hash
    O field               a series' open month (lua/buckets/open-day.lua): its days ascending,
                          the closed days of the month then the open day, flat as {day, count,
                          change, total, ...} integers; {} when the series has none

  Reply {0} unknown user (no hot state) | {1, result of step 1, result of step 2, ...};
        a missing value is nil
]]
-- @include "includes/state-read.lua"
-- @include "buckets/open-day.lua"
--@no-writes
--@body
local rcall = redis.call
local blob = rcall('HGET', KEYS[1], 's')
if not blob then return { 0 } end
local state
local reply = { 1 }
local i = 1
-- The last key a step took: the steps that read a key take the next one, in order.
local keyAt = 1
while i <= #ARGV do
  local op, out = ARGV[i], {}
  if op == 'S' then
    state = state or cmsgpack.unpack(blob)
    local n = tonumber(ARGV[i + 1])
    for k = 1, n do out[k] = stateValue(state, ARGV[i + 2 * k], ARGV[i + 2 * k + 1]) end
    i = i + 2 + 2 * n
  elseif op == 'F' then
    local n = tonumber(ARGV[i + 1])
    if n > 0 then out = rcall('HMGET', KEYS[1], unpack(ARGV, i + 2, i + 1 + n)) end
    i = i + 2 + n
  elseif op == 'Z' then
    keyAt = keyAt + 1
    out = rcall('ZRANGEBYSCORE', KEYS[keyAt], ARGV[i + 1], ARGV[i + 2], 'LIMIT', 0, ARGV[i + 3])
    i = i + 4
  elseif op == 'R' then
    keyAt = keyAt + 1
    out = rcall('ZREVRANGEBYSCORE', KEYS[keyAt], ARGV[i + 1], ARGV[i + 2], 'LIMIT', 0, ARGV[i + 3])
    i = i + 4
  elseif op == 'H' then
    keyAt = keyAt + 1
    local n = tonumber(ARGV[i + 1])
    out = rcall('HMGET', KEYS[keyAt], unpack(ARGV, i + 2, i + 1 + n))
    i = i + 2 + n
  elseif op == 'O' then
    keyAt = keyAt + 1
    local packed = rcall('HGET', KEYS[keyAt], ARGV[i + 1])
    if packed then
      out = closedDays(packed, OPEN_DAY_BYTES + 1)
      local day, _, count, change, total = struct.unpack(OPEN_DAY, packed)
      local n = #out
      out[n + 1], out[n + 2], out[n + 3], out[n + 4] = day, count, change, total
    end
    i = i + 2
  else
    return redis.error_reply('readPlan: unknown step ' .. tostring(op))
  end
  reply[#reply + 1] = out
end
return reply
