--[[
  Adds or ends a user-specific boost (admin API; spec: Points boost). The user's active and
  scheduled boosts of a system live in the state field bo:<sys>, which the event script reads
  with the rest of the state; the shard's index {t:s}:ub holds every boost record for listing.

  KEYS[1] user state hash   {t:s}:u:<userId>
  KEYS[2] boost index       {t:s}:ub      (field = boost id, value = JSON record from Node)

  ARGV[1] op: "add" or "end"
  ARGV[2] state field of the system's boosts, bo:<sys>
  ARGV[3] now, ms
  ARGV[4] boost id
  ARGV[5] for "add": the entry "id,multiplier,start,end,rounding"; for "end": ''
  ARGV[6] the boost's JSON record after the change (Node builds it)

  Reply {0} unknown user | {1} done | {2} "end" of a boost that is not active or scheduled
]]
--@body
local rcall = redis.call
local userKey, indexKey = KEYS[1], KEYS[2]
local op, field, now, id = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]

local blob = rcall('HGET', userKey, 's')
if not blob then return { 0 } end
local S = cmsgpack.unpack(blob)

-- Keep entries that are active or scheduled; drop finished ones (they stay in the index).
local kept, found = {}, false
for entry in string.gmatch(S[field] or '', '[^;]+') do
  local eid, m, s, e, r = string.match(entry, '^([^,]+),([^,]+),([^,]+),([^,]*),([^,]+)$')
  local start, finish = tonumber(s), tonumber(e)
  if finish == nil or finish > now then
    if eid == id then
      found = true
      -- Ending: a scheduled boost is removed; an active one finishes now.
      if start <= now then kept[#kept + 1] = table.concat({ eid, m, s, tostring(now), r }, ',') end
    else
      kept[#kept + 1] = entry
    end
  end
end
if op == 'add' then
  kept[#kept + 1] = ARGV[5]
elseif not found then
  return { 2 }
end
S[field] = table.concat(kept, ';')
rcall('HSET', userKey, 's', cmsgpack.pack(S))
rcall('HSET', indexKey, id, ARGV[6])
return { 1 }
