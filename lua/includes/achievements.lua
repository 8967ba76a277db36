--[[
  Completes achievements once per user and fires what a completion fires (spec: States and
  transitions, "Achievement completed ... may fire achievement triggers"; trophy-compat §5.7).
  Needs: S/set/matches (state.lua), fire (points.lua), R, `now`.
  R.ach[key] = {k, f = 'a:<key>', ua = filter|false, pre = {prerequisites}|false, up = {composites using it}|false}
]]
local function prerequisitesDone(a)
  local pre = a.pre
  for i = 1, #pre do
    local key = pre[i]
    if not num(R.ach[key].f) then return false end
  end
  return true
end

-- The composites above `a` whose prerequisites are all done complete now (complete below).
local completeAbove

local function complete(key)
  local a = R.ach[key]
  if not a then return false end
  if num(a.f) then
    -- Met again though done: a composite above it may still wait, its prerequisites all done,
    -- when the tenant file added it (or took a part the user lacked out of it) after its last
    -- part completed. Nothing else would complete it; it completes now.
    if a.up then completeAbove(a) end
    return false
  end
  if not matches(a.ua) then return false end
  set(a.f, now)
  completed[#completed + 1] = key
  -- Achievement triggers pay in the same request that completes the achievement.
  local triggers = R.at[key]
  if triggers then fire(triggers) end
  -- A composite completes when its last prerequisite does.
  if a.up then completeAbove(a) end
  return true
end

-- A composite done is looked through for the composites above it (the tenant file may have
-- added one of them since).
completeAbove = function(a)
  local up = a.up
  for i = 1, #up do
    local parent = up[i]
    local p = R.ach[parent]
    if p then
      if num(p.f) then
        if p.up then completeAbove(p) end
      elseif prerequisitesDone(p) then
        complete(parent)
      end
    end
  end
end

local function flushAchievements(aggKey, outParts)
  for i = 1, #completed do
    rcall('HINCRBY', aggKey, 'ac:' .. completed[i], '1')
    outParts[#outParts + 1] = 'a:' .. completed[i]
  end
end
