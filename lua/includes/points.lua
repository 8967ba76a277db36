--[[
  Awards points to one system (spec: Rules of points calculation 1, 2, 5, 6, 7, 8).
  Needs: S/set/num/matches (state.lua), levelIndex/boosted (math.lua), R, `now`.

  P[i] is the outcome of system R.sys[i] in this request: {before, total, added, seq, recs}.
  An award that changes nothing (a deduction at 0, a grant at maxPoints) is not recorded;
  `added` is the change actually applied; a system is in the reply only if an award changed it.
]]
-- The combined boost of a system for this user now (spec rule 6: active boosts multiply),
-- and the rounding that applies: the most conservative of the active boosts' modes
-- (down, then nearest, then up), so that stacking can never pay more than any one mode would.
local ROUNDING_RANK = { down = 1, nearest = 2, up = 3 }

local function boostOf(sysIndex)
  local cached = boostCache[sysIndex]
  if cached then return cached[1], cached[2] end
  local sys = R.sys[sysIndex]
  local boosts, own = sys.boosts, at(sys.bi)
  -- Most systems have no boost at all: answer without building the cache entry or a closure.
  if #boosts == 0 and (not own or own == '') then return 1, 'down' end
  local mult, rounding = 1, nil
  local function apply(m, r)
    mult = mult * m
    if rounding == nil or ROUNDING_RANK[r] < ROUNDING_RANK[rounding] then rounding = r end
  end
  for i = 1, #boosts do
    local b = boosts[i]
    if b.s <= now and (not b.e or now < b.e) and matches(b.f) then apply(b.m, b.r) end
  end
  -- User boosts: "id,multiplier,start,end,rounding;..." in the state field bo:<sys> (admin API).
  if own and own ~= '' then
    for id, m, s, e, r in string.gmatch(own, '([^,;]+),([^,;]+),([^,;]+),([^,;]*),([^,;]+)') do
      local start, finish = tonumber(s), tonumber(e)
      if start <= now and (not finish or now < finish) then apply(tonumber(m), r) end
    end
  end
  rounding = rounding or 'down'
  boostCache[sysIndex] = { mult, rounding }
  return mult, rounding
end

local function award(sysIndex, trigKey, amount)
  local sys = R.sys[sysIndex]
  local o = P[sysIndex]
  if not o then
    local t = S[sys.pi] or 0
    o = { sys = sys, before = t, total = t, added = 0, seq = S[sys.ni] or 0, recs = {} }
    P[sysIndex] = o
    pointsOrder[#pointsOrder + 1] = o
  end
  if amount > 0 then
    local mult, rounding = boostOf(sysIndex)
    amount = boosted(amount, mult, rounding)
  end
  local total = o.total
  local new
  if amount > 0 then
    -- maxPoints caps grants; a total already above the cap (the cap was lowered) is kept.
    if total >= sys.cap then new = total else new = math.min(total + amount, sys.cap) end
  else
    -- A deduction never takes the total below zero (and is never boosted).
    new = total + amount
    if new < 0 then new = 0 end
    if new > total then new = total end
  end
  local applied = new - total
  if applied == 0 then return end
  o.total = new
  o.added = o.added + applied
  o.seq = o.seq + 1
  o.recs[#o.recs + 1] = sformat('%d|%s|%d|%d|%s', o.seq, nowString(), applied, new, trigKey)
end

-- Fires every trigger of a list whose user-attribute filter matches; `times` multiplies points.
local function fire(triggers, times)
  for i = 1, #triggers do
    local t = triggers[i]
    if matches(t.f) then award(t.s, t.k, t.pts * (times or 1)) end
  end
end

-- Writes every changed system: state fields, level counters, the points zset, the award list.
-- Returns the reply entries; appends the stream outcome parts.
local AWARDS_KEPT, AWARDS_SLACK = 100, 20

local function flushPoints(aggKey, outParts)
  local reply = {}
  for i = 1, #pointsOrder do
    local o = pointsOrder[i]
    if #o.recs > 0 then
      local sys = o.sys
      put(sys.pi, o.total)
      put(sys.ni, o.seq)
      local lvBefore, lvAfter = levelIndex(sys.lv, o.before), levelIndex(sys.lv, o.total)
      if lvBefore ~= lvAfter then
        if lvBefore > 0 then rcall('HINCRBY', aggKey, 'lv:' .. sys.key .. ':' .. sys.lk[lvBefore], '-1') end
        if lvAfter > 0 then rcall('HINCRBY', aggKey, 'lv:' .. sys.key .. ':' .. sys.lk[lvAfter], '1') end
      end
      -- The shard's points zset key, kept per system and shard prefix across calls.
      local pzKeys = sys.pzKeys
      if not pzKeys then pzKeys = {}; sys.pzKeys = pzKeys end
      local pzKey = pzKeys[prefix]
      if not pzKey then pzKey = prefix .. 'pz:' .. sys.key; pzKeys[prefix] = pzKey end
      rcall('ZADD', pzKey, o.total, userId)
      -- The same total in the user's groups by attribute value (points summary filter).
      local attrs = R.attrs
      for a = 1, #attrs do
        local attr = attrs[a]
        local value = U['ua:' .. attr]
        if value then rcall('ZADD', prefix .. 'pa:' .. sys.key .. ':' .. attr .. ':' .. value, o.total, userId) end
      end
      local listKey = prefix .. 'aw:' .. sys.key .. ':' .. userId
      local n = rcall('LPUSH', listKey, unpack(o.recs))
      if n > AWARDS_KEPT + AWARDS_SLACK then rcall('LTRIM', listKey, 0, AWARDS_KEPT - 1) end
      local entry = { sys.key, o.added, o.total, o.before }
      for j = 1, #o.recs do entry[#entry + 1] = o.recs[j] end
      reply[#reply + 1] = entry
      outParts[#outParts + 1] = string.format('p:%s:%d:%d:%d:%d', sys.key, o.added, o.total, lvBefore, lvAfter)
    end
  end
  return reply
end
