--[[
  User upsert: profile fields, and what first identification does (trophy-compat §5.3, §5.5):
  user_creation triggers, time-trigger schedules, initial streak freezes.
  Needs: S/U/set/setProfile (state.lua), fire (points.lua), R, `now`, `prefix`, `userId`.
]]

-- Applies field/value pairs from args[first ..]; returns whether any stored value changed.
-- Whether `filter` (field, value pairs, as matches() takes it) matches the user as the `count`
-- profile pairs from args[first] would leave them, without applying them: a request refused for
-- its attributes must write nothing, and applyProfile writes the attribute indexes at once.
local function matchesWithProfile(filter, args, first, count)
  if not filter then return true end
  for i = 1, #filter, 2 do
    local value = U[filter[i]]
    for j = first, first + 2 * count - 1, 2 do
      if args[j] == filter[i] then value = args[j + 1] end
    end
    if value ~= filter[i + 1] then return false end
  end
  return true
end

-- ARGV[5] of the user and complete scripts: "day", or "day|period|lost-at|lost-at|start|start"
-- (the streak calendar of the zone the request sends, for moveCalendar and placeDeadline,
-- state.lua). Returns day, period, calendar.
local function zoneCalendar(text)
  local day, period, current, previous, periodStart, previousStart = string.match(text, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)$')
  if not day then return tonumber(text), nil, nil end
  return tonumber(day), tonumber(period), { tonumber(current), tonumber(previous), tonumber(periodStart), tonumber(previousStart) }
end

-- Returns whether a field changed, and whether the zone did (placeDeadline, state.lua).
local function applyProfile(args, first, count)
  local changed, zoneChanged = false, false
  for i = first, first + 2 * count - 1, 2 do
    local f, v = args[i], args[i + 1]
    if U[f] ~= v then
      -- A custom attribute moves the user between the shard's groups by attribute value
      -- ({t:s}:uv:<attr>:<value>, and the user's points in {t:s}:pa:<sys>:<attr>:<value>),
      -- which the points summary's userAttributes filter reads.
      if string.sub(f, 1, 3) == 'ua:' then
        local attr = string.sub(f, 4)
        local old = U[f]
        if old then rcall('SREM', prefix .. 'uv:' .. attr .. ':' .. old, userId) end
        rcall('SADD', prefix .. 'uv:' .. attr .. ':' .. v, userId)
        local systems = R.allSys
        for s = 1, #systems do
          local sysKey = systems[s]
          local total = num('p:' .. sysKey)
          if total then
            if old then rcall('ZREM', prefix .. 'pa:' .. sysKey .. ':' .. attr .. ':' .. old, userId) end
            rcall('ZADD', prefix .. 'pa:' .. sysKey .. ':' .. attr .. ':' .. v, total, userId)
          end
        end
      end
      if f == 'tz' then zoneChanged = true end
      setProfile(f, v)
      changed = true
    end
  end
  return changed, zoneChanged
end

-- The event script's profile: `text` holds `count` pairs "field\0value\0..." (ARGV[7]). Reads
-- the stored values of the fields loadState did not (a new user has none), then applies them.
local function applyProfileText(userKey, text, count, created)
  local flat, missing = {}, {}
  for f, v in string.gmatch(text, '([^%z]*)%z([^%z]*)%z') do
    flat[#flat + 1] = f
    flat[#flat + 1] = v
    if U[f] == nil then missing[#missing + 1] = f end
  end
  if not created and #missing > 0 then
    local stored = rcall('HMGET', userKey, unpack(missing))
    for i = 1, #missing do U[missing[i]] = stored[i] end
  end
  return applyProfile(flat, 1, count)
end

-- First identification. Profile fields are applied before, so attribute filters see them.
local function createUser(localDay)
  set('ct', now)
  set('up', now)
  set('cd', localDay)
  fire(R.uc)
  -- Time triggers are due one interval after first identification.
  local timeTriggers = R.tt
  for i = 1, #timeTriggers do
    local t = timeTriggers[i]
    rcall('ZADD', prefix .. t.z, now + t.ms, userId)
  end
  if R.streak and R.streak.fz then
    set('fz', R.streak.fz.init)
    set('fg', 0)
  end
end

-- After applyProfile: a new user is created (and counted in the shard), a known one whose
-- profile changed gets a new `updated`. Appends the stream outcome part of a creation.
local function identify(created, changed, localDay, aggKey, outParts)
  if created then
    createUser(localDay)
    rcall('HINCRBY', aggKey, 'users', '1')
    outParts[#outParts + 1] = 'c'
  elseif changed then
    set('up', now)
  end
end
