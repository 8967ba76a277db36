--[[
  The open day of a series of daily buckets (src/domain/buckets.ts): the latest day of one user's
  metric or points system, kept apart from its month members in the shard hash {t:s}:bl, field
  "<series>:<user>" (series "m:<metric>" or "p:<system>"). The stream worker writes it
  (lua/applyStream-2.lua); lua/readPlan-1.lua decodes it for the readers.

  Packed (struct, little-endian, 28 bytes): the day and its monthly period (src/domain/periods.ts)
  and the day's record count as int32, its net change and the total after it as doubles (exact
  integers up to 2^53: amounts are micro-units or points). struct.unpack of it costs a fraction of
  parsing and tonumber-ing the same numbers as text (bench/README.md, "Instructions per event script").
]]
local OPEN_DAY = '<i4i4i4dd'

-- Written with every HSET of the open days: a value longer than hash-max-listpack-value (64)
-- makes Redis keep the hash a hash table from its first field on. As a listpack (up to
-- hash-max-listpack-entries fields, 128 to 512 by build) every field read or written is a scan
-- of the hash: 18k instructions a field at 375 fields (callgrind, bench/script-cost.mjs).
-- No series field starts with '#'.
local OPEN_DAYS_TABLE = { '#', 'the open days of this shard; this value keeps the hash a hash table (longer than hash-max-listpack-value)' }
