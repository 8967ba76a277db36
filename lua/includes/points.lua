--[[
  Awards points to one system (spec: Rules of points calculation, 1, 2, 5, 8).
  Needs: S/set/num (state.lua), levelIndex (math.lua), `now`.
  Each system's outcome P[key] = {sys, before, total, added, seq, recs}. An award that changes
  nothing (a deduction at 0, a grant at maxPoints) is not recorded: `added` is always the change
  actually applied, and a system appears in the reply only if at least one award changed it.
]]
local P, pointsOrder = {}, {}

local function award(sys, trigKey, amount)
  local o = P[sys.key]
  if not o then
    local t = num('p:' .. sys.key) or 0
    o = { sys = sys, before = t, total = t, added = 0, seq = num('pn:' .. sys.key) or 0, recs = {} }
    P[sys.key] = o
    pointsOrder[#pointsOrder + 1] = o
  end
  local total = o.total
  local new
  if amount > 0 then
    -- maxPoints caps grants; a total already above the cap (the cap was lowered) is kept.
    if total >= sys.cap then new = total else new = math.min(total + amount, sys.cap) end
  else
    -- A deduction never takes the total below zero.
    new = total + amount
    if new < 0 then new = 0 end
    if new > total then new = total end
  end
  local applied = new - total
  if applied == 0 then return end
  o.total = new
  o.added = o.added + applied
  o.seq = o.seq + 1
  o.recs[#o.recs + 1] = string.format('%d|%d|%d|%d|%s', o.seq, now, applied, new, trigKey)
end

-- Writes every changed system: state fields, level counters, the points zset, the award list.
-- Returns the reply entries and the stream outcome parts.
local AWARDS_KEPT, AWARDS_SLACK = 100, 20

local function flushPoints(prefix, aggKey, userId, outParts)
  local reply = {}
  for i = 1, #pointsOrder do
    local o = pointsOrder[i]
    if #o.recs > 0 then
      local sys = o.sys
      set('p:' .. sys.key, o.total)
      set('pn:' .. sys.key, o.seq)
      local lvBefore, lvAfter = levelIndex(sys.lv, o.before), levelIndex(sys.lv, o.total)
      if lvBefore ~= lvAfter then
        if lvBefore > 0 then rcall('HINCRBY', aggKey, 'lv:' .. sys.key .. ':' .. sys.lk[lvBefore], -1) end
        if lvAfter > 0 then rcall('HINCRBY', aggKey, 'lv:' .. sys.key .. ':' .. sys.lk[lvAfter], 1) end
      end
      rcall('ZADD', prefix .. 'pz:' .. sys.key, o.total, userId)
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
