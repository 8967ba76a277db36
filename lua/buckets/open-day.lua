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
