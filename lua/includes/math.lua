--[[
  Integer and calendar helpers shared by every script. Each mirrors a TypeScript function
  (named in its comment); the property tests keep the two equal.
]]

-- floor(a / b) for integers a >= 0, b > 0, exact where the double quotient rounds (decimal.ts floorDiv).
local function idiv(a, b)
  local q = mfloor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end

-- Number of levels whose threshold the total strictly exceeds, 0 = none (levels.ts levelIndex).
local function levelIndex(thresholds, total)
  local i = 0
  for j = 1, #thresholds do
    if total > thresholds[j] then i = j else break end
  end
  return i
end

-- Points after a boost multiplier (boosts.ts boostedPoints): only grants are boosted; the
-- product is snapped to an integer it misses by float noise (10 x 1.1 is 11, not 11.000000000000002).
local function boosted(amount, mult, rounding)
  if amount <= 0 or mult == 1 then return amount end
  local x = amount * mult
  local nearest = math.floor(x + 0.5)
  if math.abs(x - nearest) < 1e-9 * math.max(1, math.abs(x)) then return nearest end
  if rounding == 'up' then return math.ceil(x) end
  if rounding == 'nearest' then return nearest end
  return math.floor(x)
end

-- Day index of the first day of a period (periods.ts periodStartDay).
local function daysFromCivil(y, m, d)
  y = (m <= 2) and (y - 1) or y
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local mp = (m + 9) % 12
  local doy = math.floor((153 * mp + 2) / 5) + d - 1
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
end

local function periodStartDay(period, frequency)
  if frequency == 'daily' then return period end
  if frequency == 'weekly' then return period * 7 - 3 end
  return daysFromCivil(1970 + math.floor(period / 12), period % 12 + 1, 1)
end
