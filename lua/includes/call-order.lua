--[[
  Calls that must not apply twice, or must know they applied (src/store/call-order.ts): the
  event script, the admin freeze grant and the API completion (complete-4.lua: a re-sent
  completion is answered as the first, not as "already completed"). When the connection to
  Redis drops, ioredis re-sends every command that had no reply, and Redis may have run it
  already.

  Each such call carries its writer's key on the user's shard, {t:s}:wr:<writer> (one writer per
  Redis client of a process), and its call number, which grows with every call that client
  sends. The key holds the number of the last call its writer applied on the shard, one
  little-endian double. A client's calls reach Redis on one connection in number order and are
  run in that order, re-sent ones too, so a call whose number is not above that was applied
  before. The record is per writer, not per user: other processes writing the same user in
  between cannot hide a re-sent call.

  Only a call that may have run already reads the record: Node marks the calls it re-sends (the
  event script's flags), the freeze grant always reads it, and a completion when the achievement
  is already completed. Every applied call writes it.
  The record expires a day after its expiry was last set: a re-send comes when the connection
  is back, seconds later, or when Redis has restarted and loaded its data. Setting the expiry
  costs ~8k instructions (Redis rewrites a relative expiry for propagation: bench/README.md), so
  the caller asks for it about once an hour per record and KEEPTTL keeps it otherwise.
]]
local WRITER_TTL_MS = '86400000'

local function appliedBefore(writerKey, callNumber)
  local last = rcall('GET', writerKey)
  return last ~= false and sunpack('<d', last) >= callNumber
end

local function markApplied(writerKey, callNumber, setExpiry)
  if setExpiry then
    rcall('SET', writerKey, spack('<d', callNumber), 'PX', WRITER_TTL_MS)
  else
    rcall('SET', writerKey, spack('<d', callNumber), 'KEEPTTL')
  end
end
