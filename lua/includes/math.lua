--[[
  Integer helpers shared by every script. Mirrors src/domain/decimal.ts (floorDiv) and
  src/domain/levels.ts (levelIndex); the property tests keep the two equal.
]]

-- floor(a / b) for integers a >= 0, b > 0, exact even where the double quotient rounds up.
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end

-- Number of levels whose threshold the total strictly exceeds (0 = no level).
-- `thresholds` is ascending (spec: "a user gets the level when their total exceeds it").
local function levelIndex(thresholds, total)
  local i = 0
  for j = 1, #thresholds do
    if total > thresholds[j] then i = j else break end
  end
  return i
end
