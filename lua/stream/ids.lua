--[[
  Stream ids "<ms>-<seq>" (src/jobs/stream-ops.ts compareStreamIds mirrors it). They compare
  neither as strings nor as one number; both parts fit a double exactly.
]]
local function idCompare(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  am, bm = tonumber(am), tonumber(bm)
  if am ~= bm then return am < bm and -1 or 1 end
  as, bs = tonumber(as), tonumber(bs)
  if as ~= bs then return as < bs and -1 or 1 end
  return 0
end
