--[[
  Awards points to one system (spec: Rules of points calculation 1, 2, 5, 6, 7, 8).
  Needs: S/set/num/matches (state.lua), levelIndex/boosted (math.lua), R, `now`.

  P[i] is the outcome of system R.sys[i] in this request: {before, total, added, seq, recs}.
  An award that changes nothing (a deduction at 0, a grant at maxPoints) is not recorded;
  `added` is the change actually applied; a system is in the reply only if an award changed it.
]]
-- The combined boost of a system for this user at instant t (spec rule 6: active boosts
-- multiply), and the rounding that applies: the most conservative of the active boosts' modes
-- (down, then nearest, then up), so that stacking can never pay more than any one mode would.
local ROUNDING_RANK = { down = 1, nearest = 2, up = 3 }

local function boostAt(sysIndex, t)
  local sys = R.sys[sysIndex]
  local boosts, own = sys.boosts, at(sys.bi)
  -- Most systems have no boost at all: answer without a closure.
  if #boosts == 0 and (not own or own == '') then return 1, 'down' end
  local mult, rounding = 1, nil
  -- A boost's rounding mode applies only to a decimal multiplier (spec: Points boost): a whole
  -- one (its mode `down` by default) takes no part in choosing the stack's mode
  -- (src/domain/boosts.ts combineBoosts).
  local function apply(m, r)
    mult = mult * m
    if m % 1 ~= 0 and (rounding == nil or ROUNDING_RANK[r] < ROUNDING_RANK[rounding]) then rounding = r end
  end
  for i = 1, #boosts do
    local b = boosts[i]
    if b.s <= t and (not b.e or t < b.e) and matches(b.f) then apply(b.m, b.r) end
  end
  -- User boosts: "id,multiplier,start,end,rounding;..." in the state field bo:<sys> (admin API).
  if own and own ~= '' then
    for id, m, s, e, r in string.gmatch(own, '([^,;]+),([^,;]+),([^,;]+),([^,;]*),([^,;]+)') do
      local start, finish = tonumber(s), tonumber(e)
      if start <= t and (not finish or t < finish) then apply(tonumber(m), r) end
    end
  end
  return mult, rounding or 'down'
end

-- boostAt(sysIndex, now), remembered for the rest of the user's request (in two tables of
-- numbers and strings: a pair table a call is an allocation, and garbage, on every grant).
local function boostOf(sysIndex)
  local mult = boostMult[sysIndex]
  if mult then return mult, boostRounding[sysIndex] end
  local rounding
  mult, rounding = boostAt(sysIndex, now)
  boostMult[sysIndex], boostRounding[sysIndex] = mult, rounding
  return mult, rounding
end

-- The first instant after t at which a boost of the system that applies to the user (global
-- and matching, as boostAt takes them, or the user's own) starts or ends, or nil: the combined
-- boost is the same from t until then. A boost the user is not eligible for must not split a run.
local function nextBoostChange(sysIndex, t)
  local sys = R.sys[sysIndex]
  local change = nil
  local function consider(x)
    if x and x > t and (change == nil or x < change) then change = x end
  end
  for i = 1, #sys.boosts do
    local b = sys.boosts[i]
    if matches(b.f) then
      consider(b.s)
      consider(b.e)
    end
  end
  local own = at(sys.bi)
  if own and own ~= '' then
    for id, m, s, e in string.gmatch(own, '([^,;]+),([^,;]+),([^,;]+),([^,;]*),([^,;]+)') do
      consider(tonumber(s))
      consider(tonumber(e))
    end
  end
  return change
end

-- The points of n intervals of a time trigger paying `points` each, the first due at `first`,
-- one every `interval` ms (boosts.ts intervalPoints). Points are earned at their due instant, so
-- each interval is boosted by the boosts active then, not at the (later) tick that pays it (spec:
-- "points earned in the window are multiplied"). The intervals between two boost changes are
-- one run, boosted together (one rounding per run, as n crossings of a metric trigger).
local function intervalPoints(sysIndex, points, first, interval, n)
  if points <= 0 then return n * points end
  local total, i = 0, 0
  while i < n do
    local t = first + i * interval
    local mult, rounding = boostAt(sysIndex, t)
    local change = nextBoostChange(sysIndex, t)
    local k = n - i
    if change then k = math.min(k, math.ceil((change - t) / interval)) end
    total = total + boosted(k * points, mult, rounding)
    i = i + k
  end
  return total
end

-- string.format writes every conversion with sprintf, a %s too (~0.8k instructions each): the
-- award record's and the outcome part's constant text is in their formats instead, made once per
-- trigger and per system ('%' doubled: a key is text, not a format).
local AWARD_FORMAT = {}
local function awardFormat(trigKey)
  local format = AWARD_FORMAT[trigKey]
  if not format then
    format = '%d|%s|%d|%d|' .. string.gsub(trigKey, '%%', '%%%%')
    AWARD_FORMAT[trigKey] = format
  end
  return format
end

-- `preBoosted`: the amount is boosted already (intervalPoints).
local function award(sysIndex, trigKey, amount, preBoosted)
  local sys = R.sys[sysIndex]
  local o = P[sysIndex]
  if not o then
    -- One outcome table per system, kept by the library and reset for each user that the
    -- system awards: new tables cost an allocation, growth and collection on every event.
    local t = S[sys.pi] or 0
    o = sys.outcome
    if not o then o = { sys = sys, recs = {} }; sys.outcome = o end
    o.before, o.total, o.added, o.seq = t, t, 0, S[sys.ni] or 0
    emptyList(o.recs)
    P[sysIndex] = o
    pointsOrder[#pointsOrder + 1] = o
  end
  if amount > 0 and not preBoosted then
    local mult, rounding = boostOf(sysIndex)
    amount = boosted(amount, mult, rounding)
  end
  local total = o.total
  local new
  if amount > 0 then
    -- maxPoints caps grants; a total already above the cap (the cap was lowered) is kept.
    if total >= sys.cap then new = total else new = mmin(total + amount, sys.cap) end
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
  o.recs[#o.recs + 1] = sformat(awardFormat(trigKey), o.seq, nowString(), applied, new)
end

-- Fires every trigger of a list whose user-attribute filter matches.
local function fire(triggers)
  for i = 1, #triggers do
    local t = triggers[i]
    if matches(t.f) then award(t.s, t.k, t.pts) end
  end
end

-- Writes every changed system: state fields, the points zset, the award list.
-- Returns the reply entries ({key, added, total, before, award...} each), or with `outcomes` the
-- changed systems' outcome tables themselves (the event script copies them into its flat reply:
-- an entry table filled only to be copied again cost it ~30 VM instructions a system);
-- appends the stream outcome parts.
local AWARDS_KEPT, AWARDS_SLACK = 100, 20
-- The reply list and each system's entry are kept by the library and refilled (as the outcome
-- tables above): the caller reads them before the next user's flushPoints.
local pointsReplyList = {}

local function flushPoints(outParts, outcomes)
  local reply = pointsReplyList
  emptyList(reply)
  for i = 1, #pointsOrder do
    local o = pointsOrder[i]
    if #o.recs > 0 then
      local sys = o.sys
      put(sys.pi, o.total)
      put(sys.ni, o.seq)
      -- The levels before and after, for the stream record (webhooks' points.level_changed). Users
      -- per level are counted from the points zset at read time, so no counter is kept here.
      local lvBefore, lvAfter = levelIndex(sys.lv, o.before), levelIndex(sys.lv, o.total)
      -- The shard's points zset key and the head of the user's award list key, kept per system
      -- and shard prefix across calls. A script that declares the zset in KEYS (timeTick-4.lua)
      -- declares this same name.
      local pzKeys = sys.pzKeys
      if not pzKeys then pzKeys = {}; sys.pzKeys = pzKeys; sys.awHeads = {} end
      local pzKey = pzKeys[prefix]
      if not pzKey then
        pzKey = prefix .. 'pz:' .. sys.key
        pzKeys[prefix], sys.awHeads[prefix] = pzKey, prefix .. 'aw:' .. sys.key .. ':'
      end
      rcall('ZADD', pzKey, o.total, userId)
      -- The same total in the user's groups by attribute value (points summary filter).
      local attrs = R.attrs
      for a = 1, #attrs do
        local attr = attrs[a]
        local value = U['ua:' .. attr]
        if value then rcall('ZADD', prefix .. 'pa:' .. sys.key .. ':' .. attr .. ':' .. value, o.total, userId) end
      end
      local listKey = sys.awHeads[prefix] .. userId
      local n = rcall('LPUSH', listKey, unpack(o.recs))
      if n > AWARDS_KEPT + AWARDS_SLACK then rcall('LTRIM', listKey, 0, AWARDS_KEPT - 1) end
      if outcomes then
        reply[#reply + 1] = o
      else
        local entry = sys.replyEntry
        if not entry then entry = {}; sys.replyEntry = entry end
        emptyList(entry)
        entry[1], entry[2], entry[3], entry[4] = sys.key, o.added, o.total, o.before
        for j = 1, #o.recs do entry[4 + j] = o.recs[j] end
        reply[#reply + 1] = entry
      end
      -- Last, the number of the change's last award: the webhook consumer finds the change's own
      -- awards by it (src/jobs/webhooks/payloads.ts), where two changes of the user at one instant
      -- can end at the same total. A field at the end, so that a reader of the first six (an
      -- earlier build's consumer, the stream worker) reads the part as it did, and one more %d in
      -- the one string.format (a part of its own cost the event script ~4k instructions).
      local partFormat = sys.partFormat
      if not partFormat then
        partFormat = 'p:' .. string.gsub(sys.key, '%%', '%%%%') .. ':%d:%d:%d:%d:%d'
        sys.partFormat = partFormat
      end
      outParts[#outParts + 1] = sformat(partFormat, o.added, o.total, lvBefore, lvAfter, o.seq)
    end
  end
  return reply
end
