--[[
  The open month of a series of daily buckets (src/domain/buckets.ts): the latest day of one
  user's metric or points system, its OPEN DAY, and the days of the same month closed before it,
  kept apart from the month members in the shard hash {t:s}:bl, field "<series>:<user>" (series
  "m:<metric>" or "p:<system>"). The stream worker writes it (lua/applyStream-2.lua);
  lua/readPlan-1.lua decodes it for the readers.

  Packed (struct, little-endian; src/domain/buckets.ts encodeOpenMonth is the reference):
    OPEN_DAY    28 bytes: the open day and its monthly period (src/domain/periods.ts) and the
                day's record count as int32, its net change and the total after it as doubles
                (exact integers up to 2^53: amounts are micro-units or points). A value of
                these 28 bytes alone is what the version before the open month wrote: an open
                month with no closed days.
    CLOSED_DAY  24 bytes each after it, ascending: a closed day of the same month (day, count as
                int32, change, total as doubles). Appended when a later day of the month opens:
                a day change is a string append, with no zset call and no text formatting.
  struct.unpack of it costs a fraction of parsing and tonumber-ing the same numbers as text
  (bench/README.md, "Instructions per event script").
]]
local OPEN_DAY, OPEN_DAY_BYTES = '<i4i4i4dd', 28
local CLOSED_DAY, CLOSED_DAY_BYTES = '<i4i4dd', 24

-- Written with every HSET of the open months: a value longer than hash-max-listpack-value (64)
-- makes Redis keep the hash a hash table from its first field on. As a listpack (up to
-- hash-max-listpack-entries fields, 128 to 512 by build) every field read or written is a scan
-- of the hash: 18k instructions a field at 375 fields (callgrind, bench/script-cost.mjs).
-- No series field starts with '#'.
local OPEN_DAYS_TABLE = { '#', 'the open days of this shard; this value keeps the hash a hash table (longer than hash-max-listpack-value)' }

-- Closed days packed from byte `first` of `packed` on (a value's: OPEN_DAY_BYTES + 1), in the
-- order kept (ascending): flat, each day as day, count, change, total.
local function closedDays(packed, first)
  local out, n = {}, 0
  for at = first, #packed, CLOSED_DAY_BYTES do
    out[n + 1], out[n + 2], out[n + 3], out[n + 4] = struct.unpack(CLOSED_DAY, packed, at)
    n = n + 4
  end
  return out
end
