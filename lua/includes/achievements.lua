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

local function complete(key)
  local a = R.ach[key]
  if not a or num(a.f) or not matches(a.ua) then return false end
  set(a.f, now)
  completed[#completed + 1] = key
  -- Achievement triggers pay in the same request that completes the achievement.
  local triggers = R.at[key]
  if triggers then fire(triggers) end
  -- A composite completes when its last prerequisite does.
  if a.up then
    local up = a.up
    for i = 1, #up do
      local parent = up[i]
      local p = R.ach[parent]
      if p and not num(p.f) and prerequisitesDone(p) then complete(parent) end
    end
  end
  return true
end

local function flushAchievements(aggKey, outParts)
  for i = 1, #completed do
    rcall('HINCRBY', aggKey, 'ac:' .. completed[i], '1')
    outParts[#outParts + 1] = 'a:' .. completed[i]
  end
end
