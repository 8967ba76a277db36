--[[
  Adds or ends a user-specific boost (admin API; spec: Points boost). The user's active and
  scheduled boosts of a system live in the state field bo:<sys>, which the event script reads
  with the rest of the state; the shard's index {t:s}:ub holds every boost record for listing.

  In the same atomic call as the change, one record goes to the shard stream (kind "ub",
  src/domain/stream-record.ts): the single source of the boost's outbound events. The webhook
  consumer schedules the boost's boundaries (points.boost_started / points.boost_finished)
  from it, so a process that dies after this call loses nothing.

  KEYS[1] user state hash   {t:s}:u:<userId>
  KEYS[2] boost index       {t:s}:ub      (field = boost id, value = JSON record from Node)
  KEYS[3] shard stream      {t:s}:x, and the hook stream {t:s}:xh (includes/hooks.lua)
  KEYS[4..] the due sets of the system's time triggers, {t:s}:tt:<sys>.<trig> (none when it has none)

  ARGV[1] op: "add" or "end"
  ARGV[2] state field of the system's boosts, bo:<sys>
  ARGV[3] now, ms
  ARGV[4] boost id
  ARGV[5] for "add": the entry "id,multiplier,start,end,rounding"; for "end": ''
  ARGV[6] the boost's JSON record after the change (Node builds it)
  ARGV[7] user id
  ARGV[8] '1' when the tenant has a webhook endpoint: the record also goes to the hook stream
          (includes/hooks.lua; a "ub" record is always wanted then), else ''
  ARGV[9] the index of bo:<sys> in the state array (src/store/state-slots.ts); a state still in
          the map layout of earlier versions is written back as a map, by name

  Stream record: k "ub", u user, t now, z the user's zone, e "<op>|<sys>|<boost id>|<start>|<end>"
  (the boost's window after the change, ms; end '' when open; an "end" of a scheduled boost
  leaves an empty window, end = start; of an active one, end = now, or start + 1 when start = now).

  Reply {0} unknown user | {1} done (an "add" of a boost the index holds already: done before,
        nothing written) | {2} "end" of a boost that is not active or scheduled
]]
-- @include "includes/hooks.lua"
-- @include "includes/state-read.lua"
--@body
local rcall = redis.call
local userKey, indexKey, streamKey = KEYS[1], KEYS[2], KEYS[3]
local op, field, now, id = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]

local got = rcall('HMGET', userKey, 's', 'tz')
local blob = got[1]
if not blob then return { 0 } end
-- An "add" whose boost is in the index already is this call again: ioredis re-sent it after the
-- connection dropped before its reply (every add has a new id, src/api/boosts.ts). Run again, it
-- ended the boost it found at `now` and added it once more: two entries of one boost, both
-- active before `now`, and a time trigger's catch-up over that window boosted twice.
if op == 'add' and rcall('HEXISTS', indexKey, id) == 1 then return { 1 } end
local S = cmsgpack.unpack(blob)
local slot = field
if S[1] ~= nil then
  slot = tonumber(ARGV[9])
  for i = #S + 1, slot - 1 do S[i] = false end
end

local function parseEntry(entry)
  return string.match(entry, '^([^,]+),([^,]+),([^,]+),([^,]*),([^,]+)$')
end

-- A time trigger's interval is boosted by the boosts active at its due instant, and a catch-up
-- pays intervals due before now (README: Boosts on time triggers). So a finished boost is dropped
-- only once it ended no later than the user's earliest unpaid interval: before that, a catch-up
-- after ticks that did not run still needs it.
local keepAfter = now
for i = 4, #KEYS do
  local due = tonumber(rcall('ZSCORE', KEYS[i], ARGV[7]))
  if due ~= nil and due < keepAfter then keepAfter = due end
end

-- Keep entries that are active or scheduled, or finished but still owed (above); drop the rest
-- (they stay in the index). Only a live entry can be ended.
local kept, found, windowStart, windowEnd = {}, false, nil, nil
for entry in string.gmatch(stateValue(S, ARGV[9], field) or '', '[^;]+') do
  local eid, m, s, e, r = parseEntry(entry)
  local start, finish = tonumber(s), tonumber(e)
  if finish ~= nil and finish <= now then
    if finish > keepAfter then kept[#kept + 1] = entry end
  else
    if eid == id then
      found = true
      -- Ending: a scheduled boost is removed (its window becomes empty); an active one finishes
      -- now, or 1 ms after its start when it started this millisecond: grants in it were boosted,
      -- so its window must not be empty (src/domain/boosts.ts endedBoostEnd).
      windowStart = s
      if start <= now then
        windowEnd = start == now and string.format('%d', now + 1) or ARGV[3]
        kept[#kept + 1] = table.concat({ eid, m, s, windowEnd, r }, ',')
      else
        windowEnd = s
      end
    else
      kept[#kept + 1] = entry
    end
  end
end
if op == 'add' then
  kept[#kept + 1] = ARGV[5]
  local _, _, s, e = parseEntry(ARGV[5])
  windowStart, windowEnd = s, e
elseif not found then
  return { 2 }
end
S[slot] = table.concat(kept, ';')
rcall('HSET', userKey, 's', cmsgpack.pack(S))
rcall('HSET', indexKey, id, ARGV[6])
local system = string.sub(field, 4)
appendRecord(streamKey, ARGV[8] == '1', 'ub', ARGV[7], now, got[2] or 'UTC', table.concat({ op, system, id, windowStart, windowEnd }, '|'), {})
return { 1 }
