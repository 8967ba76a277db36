--[[
  Streak settlement and extension on the user's calendar (src/domain/streak.ts and model.ts mirror it).
  Needs: S/at/put/set/num, the I_* indexes, lastCovered (state.lua), periodStartDay (math.lua),
  mfloor (context.lua), fire (points.lua), complete (achievements.lua), R, `now`, `prefix`,
  `userId`.

  State: sl length (0 once lost), ss first period, ssd the local day it began (weekly and monthly
  tenants only: a daily streak's is ss; readers use it while its period is ss), sp last period extended or covered by a
  freeze, sxt the instant of the last extension (shown by the streak reads), sm/smp the instant
  of the user's last work and its period on the user's calendar (lastCovered, moveCalendar in
  state.lua), sq/sv:<metric>/sqa/sqk the period being accumulated, its values, the instant of
  its first value and the most full thresholds its values have reached, sb longest, fz freezes
  held, fg auto-earn grants credited, fgd the local day of the last one (tenants with autoEarn),
  cd local day of first identification.
]]
-- Brings the streak up to `nowPeriod`: in day order, credits auto-earned freezes (every
-- `every` days after first identification, capped at `max`; a user holding more, the tenant
-- file having lowered `max`, keeps them and earns none until below it) and lets each period
-- that ended without an extension consume a freeze; with none left the streak is lost (length 0).
local function settleStreak(nowDay, nowPeriod)
  local st = R.streak
  if not st then return end
  local length = S[I_SL] or 0
  local last = lastCovered()
  local fzc = st.fz
  local pending = nil
  if length > 0 and last ~= nil and last < nowPeriod - 1 then pending = last + 1 end
  if fzc then
    local held, grants, createdDay = S[I_FZ] or 0, S[I_FG] or 0, at(I_CD)
    local heldBefore, grantsBefore = held, grants
    local every = (fzc.every > 0 and createdDay) and fzc.every or nil
    -- The day of the last grant credited (fgd, registered with autoEarn); grants come `every`
    -- days apart from it, so a changed everyDays takes effect from the last grant. A state
    -- written before fgd was kept: counted from the day of first identification.
    local grantDayStored = every and at(I_FGD)
    local lastGrant = every and (grantDayStored or createdDay + grants * every)
    local guard = 0
    while guard < 100000 do
      guard = guard + 1
      local consumeDay = pending and periodStartDay(pending + 1, st.freq) or nil
      local nextGrant = every and (lastGrant + every) or nil
      if nextGrant and nextGrant <= nowDay and (not consumeDay or nextGrant <= consumeDay) then
        if not consumeDay then
          -- Nothing left to consume: credit every remaining grant at once (the cap is monotone).
          local due = math.floor((nowDay - lastGrant) / every)
          local before = held
          if held < fzc.max then held = math.min(fzc.max, held + due * fzc.amt) end
          streakOut.earned = streakOut.earned + held - before
          grants = grants + due
          lastGrant = lastGrant + due * every
        else
          local before = held
          if held < fzc.max then held = math.min(fzc.max, held + fzc.amt) end
          streakOut.earned = streakOut.earned + held - before
          grants = grants + 1
          lastGrant = lastGrant + every
        end
      elseif consumeDay then
        if held > 0 then
          held = held - 1
          streakOut.consumed = streakOut.consumed + 1
          streakOut.frozen[#streakOut.frozen + 1] = pending
          last = pending
          pending = (pending + 1 <= nowPeriod - 1) and (pending + 1) or nil
        else
          -- No freeze left: the streak is lost; grants due later are still credited.
          pending = nil
        end
      else
        break
      end
    end
    if held ~= heldBefore then set('fz', held) end
    -- fg (grants credited) is kept too: an older build side by side counts by it.
    if grants ~= grantsBefore then set('fg', grants) end
    if every and lastGrant ~= grantDayStored then put(I_FGD, lastGrant) end
    if #streakOut.frozen > 0 then
      set('sp', last)
      local args = {}
      local frozen = streakOut.frozen
      for i = 1, #frozen do
        local p = frozen[i]
        args[#args + 1] = p
        args[#args + 1] = p .. ':' .. length .. ':f'
      end
      rcall('ZADD', prefix .. 'sh:' .. userId, unpack(args))
    end
  end
  if length > 0 and last ~= nil and last < nowPeriod - 1 then
    streakOut.lost = length
    set('sl', 0)
    rcall('ZREM', prefix .. 'sa', userId)
    rcall('ZREM', prefix .. 'sd', userId)
  end
end

-- The streak at `length` with `lastPeriod` its last covered period (the caller sets its start,
-- `ss`), and the shard's indexes of it: longest ever (sb), active by length (sa) and the instant
-- it is lost (sd). Rankings and the expiry sweep read sa and sd.
local function storeStreak(length, lastPeriod, lostAt)
  set('sl', length)
  set('sp', lastPeriod)
  if length > (num('sb') or 0) then
    set('sb', length)
    rcall('ZADD', prefix .. 'sb', length, userId)
  end
  rcall('ZADD', prefix .. 'sa', length, userId)
  rcall('ZADD', prefix .. 'sd', lostAt, userId)
end

-- Adds this event's value to the period's accumulation and extends the streak the first time
-- in a period that the threshold is met. `calendar`: as moveCalendar's (state.lua); its first two
-- are the lost-at if extended now and if last covered in nowPeriod - 1. Returns whether the
-- streak was extended.
local function extendStreak(nowPeriod, nowDay, value, calendar)
  local st = R.streak
  if not st or not st.counts then
    if #streakOut.frozen > 0 and streakOut.lost == 0 then rcall('ZADD', prefix .. 'sd', calendar[2], userId) end
    return false
  end
  if at(I_SQ) ~= nowPeriod then
    for i = 1, #st.m do
      local m = st.m[i]
      if S[m.fi] then put(m.fi, 0) end
    end
    -- And the values of metrics the streak does not count now (the tenant file took them out):
    -- kept, a metric put back later in this period would count another period's value toward it.
    local others = st.oi
    if others then
      for i = 1, #others do
        if S[others[i]] then put(others[i], 0) end
      end
    end
    put(I_SQ, nowPeriod)
    put(I_SQA, now)
    if S[I_SQK] then put(I_SQK, false) end
  end
  put(st.fi, (S[st.fi] or 0) + value)
  -- Full thresholds the period's values have reached: of every metric (mode all: the least), or
  -- of each metric (mode any: their sum, each a meeting by itself). Met at one.
  local times = nil
  for i = 1, #st.m do
    local m = st.m[i]
    local n = mfloor((S[m.fi] or 0) / m.th)
    if st.any then
      times = (times or 0) + (n > 0 and n or 0)
    elseif times == nil or n < times then
      times = n
    end
  end
  local met = times >= 1
  -- Covered before this event's work; then the work's instant (sm): the first meeting of the
  -- threshold in the period, and each time its values reach more full thresholds than they had
  -- (a later lesson moves it; a value of 0.01, a -1 and +1, or one metric of several does not: a
  -- move east reads it on the new calendar).
  local last = lastCovered()
  -- The most reached, when this accumulation's (smp is sq whenever sqk was written since: a
  -- process of an earlier version restarts the values without resetting sqk).
  local mostReached = S[I_SMP] == S[I_SQ] and S[I_SQK] or 0
  if met and times > mostReached then
    put(I_SM, now)
    put(I_SMP, nowPeriod)
    put(I_SQK, times)
  end
  if not (met and (last == nil or nowPeriod > last)) then
    if #streakOut.frozen > 0 and streakOut.lost == 0 then rcall('ZADD', prefix .. 'sd', calendar[2], userId) end
    return false
  end
  local length = num('sl') or 0
  if last ~= nil and last == nowPeriod - 1 and length > 0 then
    length = length + 1
  else
    length = 1
    set('ss', nowPeriod)
    if I_SSD then put(I_SSD, nowDay) end
  end
  put(I_SXT, now)
  storeStreak(length, nowPeriod, calendar[1])
  -- History: one member per extended period, "period:length".
  local historyKey = prefix .. 'sh:' .. userId
  rcall('ZADD', historyKey, nowPeriod, nowPeriod .. ':' .. length)
  -- Trimmed to the last historyKept periods, but never inside the live streak: wrapped finds a
  -- streak's start in its history (a streak past 800 days lost its start, and wrapped its date).
  if nowPeriod % 64 == 0 then rcall('ZREMRANGEBYSCORE', historyKey, '-inf', mmin(nowPeriod - R.historyKept, (num('ss') or nowPeriod) - 1)) end
  -- Streak triggers pay at each multiple of their length; streak achievements complete at theirs.
  local streakTriggers = R.st
  for i = 1, #streakTriggers do
    local t = streakTriggers[i]
    if length % t.n == 0 and matches(t.f) then award(t.s, t.k, t.pts) end
  end
  local streakAchievements = R.sach
  for i = 1, #streakAchievements do
    local key = streakAchievements[i]
    if length >= R.ach[key].n then complete(key) end
  end
  return true
end

local function streakOutcome(outParts, extended)
  if streakOut.lost > 0 then outParts[#outParts + 1] = 'sl:' .. streakOut.lost end
  if streakOut.consumed > 0 then outParts[#outParts + 1] = 'fc:' .. streakOut.consumed end
  if streakOut.earned > 0 then outParts[#outParts + 1] = 'fe:' .. streakOut.earned end
  if extended then outParts[#outParts + 1] = 's:' .. num('sl') end
end
