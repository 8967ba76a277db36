--[[
  The user's state hash ({t:s}:u:<user>), read once with HMGET and written once with HSET.

  Hot state lives in ONE field, `s`, a msgpack ARRAY: each state name has a fixed position, its
  index in the tenant's registry (src/store/state-slots.ts), R.slot[name]. An absent value is
  false (so the array has no holes and cmsgpack keeps it an array); num() and set() turn it into
  nil and back. Measured: an array decodes and encodes in about half the instructions of a map
  keyed by names (bench/README.md), and one field beats HMGET of many (~13 µs for 26 fields).
  A state written before this layout is a map: it is read as such and written back as an array;
  names in it that no config registered are kept, as a map, in the slot `_x`.
  Profile fields (tz, em, nm, se, dt, ua:<attr>) stay separate fields, written by identify and
  read by the user endpoints; U holds the ones this call read, `setProfile` marks them dirty.
  Idempotency keys are separate fields too (i:<metric>:<key>), so `s` stays small.
]]
local SLOT = R.slot

-- Indexes of the fixed names and of the names the rules carry, resolved once when the library
-- loads (a name costs a lookup in SLOT; the hot paths use indexes: at/put below).
local I_CT, I_CD, I_SL, I_SS, I_SP, I_SQ, I_FZ, I_FG, I_X = SLOT.ct, SLOT.cd, SLOT.sl, SLOT.ss, SLOT.sp, SLOT.sq, SLOT.fz, SLOT.fg, SLOT._x
local I_SXT, I_SM, I_SMP, I_SQA, I_SQK = SLOT.sxt, SLOT.sm, SLOT.smp, SLOT.sqa, SLOT.sqk
-- The local day a weekly or monthly streak began; nil for other tenants (src/store/state-slots.ts).
local I_SSD = SLOT.ssd
-- The local day of the last auto-earned freeze; nil for tenants without autoEarn (streak.lua).
local I_FGD = SLOT.fgd
R.mfi = R.mf and SLOT[R.mf] or false
for i = 1, #R.sys do
  local sys = R.sys[i]
  sys.pi, sys.ni, sys.bi = SLOT['p:' .. sys.key], SLOT['pn:' .. sys.key], SLOT[sys.bf]
end
for i = 1, #R.mt do
  local t = R.mt[i]
  t.hwi, t.tci = SLOT[t.hw], t.tc and SLOT[t.tc] or false
  -- An unfiltered trigger's own sum from when it had filters (R.mt otc): event-2.lua step 6a.
  t.otci = t.otc and SLOT[t.otc] or false
end
if R.streak then
  local st = R.streak
  st.fi = st.f and SLOT[st.f] or false
  for i = 1, #st.m do st.m[i].fi = SLOT[st.m[i].f] end
  if st.o then
    local others = {}
    for i = 1, #st.o do others[i] = SLOT[st.o[i]] end
    st.oi = others
  end
end

-- The length of a msgpack array's header by its first byte (fixarray 0x90-0x9f, array 16 0xdc);
-- nil for anything else: a map (the layout of earlier versions), or an array 32 (too long for the
-- stack below).
local ARRAY_HEADER = { [0xdc] = 3 }
for b = 0x90, 0x9f do ARRAY_HEADER[b] = 1 end
-- Redis's Lua stack holds 8000 values (LUAI_MAXCSTACK): at most this many go through it at once.
-- An array of more (a registry grown over many config changes: positions are never reused) is
-- decoded by cmsgpack.unpack instead.
local STACKED_VALUES = 4000
-- The values unpack_limit returned, as a table sized once; nil when it stopped before the end of
-- the blob (its first value, the next offset, is -1 at the end).
local function gathered(nextOffset, ...)
  if nextOffset ~= -1 then return nil end
  return { ... }
end

-- The state array of a stored `s` (nil: a new user), at least R.ns long.
-- An array is decoded as the values after its header, gathered by a table constructor: cmsgpack
-- fills an array table one element at a time (a rehash at each power of two: ~300 machine
-- instructions an element, ~9.5k a core event; bench/README.md, "The thirty-second stop"), where
-- the constructor sizes it once (gathered). The bytes stored are the same as ever; only the
-- reading changed.
local function decodeState(blob)
  local skip = blob and ARRAY_HEADER[sbyte(blob, 1)]
  local state = skip and #blob > skip and gathered(munpackLimit(blob, STACKED_VALUES, skip))
  if not state then
    state = blob and munpack(blob) or {}
    if blob and state[1] == nil then
      -- The map layout of earlier versions.
      local array, unknown = {}, nil
      for name, value in next, state do
        local index = SLOT[name]
        if index then array[index] = value else
          unknown = unknown or {}
          unknown[name] = value
        end
      end
      array[I_X] = unknown or false
      for i = 1, R.ns do
        if array[i] == nil then array[i] = false end
      end
      return array
    end
  end
  -- Positions registered since the state was written (or a new user's: all of them).
  for i = #state + 1, R.ns do state[i] = false end
  -- Names kept in `_x` that a config has registered since (a metric dropped before the upgrade
  -- to the array and added back): their values move to their positions, written with the state.
  local unknown = state[I_X]
  if unknown then
    for name, value in next, unknown do
      local index = SLOT[name]
      if index then
        if state[index] == false then state[index] = value end
        unknown[name] = nil
        stateDirty = true
      end
    end
    if next(unknown) == nil then state[I_X] = false end
  end
  return state
end

-- Reads `s` and the given profile fields, and `first` (an idempotency field) when given; returns
-- the value of `first`. A field asked for only to keep the positions fixed cost an argument and a
-- copy of `s` in the reply (~2k instructions an event).
local function loadState(userKey, profileFields, first)
  local vals
  if first then vals = rcall('HMGET', userKey, 's', first, unpack(profileFields)) else vals = rcall('HMGET', userKey, 's', unpack(profileFields)) end
  S = decodeState(vals[1])
  local offset = first and 2 or 1
  for i = 1, #profileFields do U[profileFields[i]] = vals[i + offset] end
  if first then return vals[2] end
end

-- The value at index i of the state (nil when absent), and its change.
local function at(i)
  local value = S[i]
  if value == false then return nil end
  return value
end

local function put(i, value)
  if value == nil then value = false end
  S[i] = value
  stateDirty = true
end

-- The same by name.
local function num(field)
  return at(SLOT[field])
end

local function set(field, value)
  put(SLOT[field], value)
end

-- Any profile write forgets `pd`, the digest of the last profile an event applied
-- (user.lua applyProfileText), so the next event compares its fields again.
local function setProfile(field, value)
  U[field] = value
  profileDirty[#profileDirty + 1] = field
  if num('pd') then set('pd', nil) end
end

-- `extra` holds further field/value pairs to write in the same HSET (the idempotency key).
local function flushState(userKey, extra)
  local args = extra or {}
  if stateDirty then
    args[#args + 1] = 's'
    args[#args + 1] = mpack(S)
  end
  for i = 1, #profileDirty do
    args[#args + 1] = profileDirty[i]
    args[#args + 1] = U[profileDirty[i]]
  end
  if #args > 0 then rcall('HSET', userKey, unpack(args)) end
end

-- Attribute filter: flat {field, value, field, value...}; every pair must equal the user's value.
local function matches(filter)
  if not filter then return true end
  for i = 1, #filter, 2 do
    if U[filter[i]] ~= filter[i + 1] then return false end
  end
  return true
end

-- The last period the streak covers on the user's calendar (src/domain/streak.ts coveredPeriod
-- mirrors it): `sp`, the last period extended or covered by a freeze, or `smp`, the period of the
-- user's calendar that holds `sm`, the instant of the user's work: the first meeting of the
-- streak's threshold in a period, extended or not, and each time the period's values reach a new
-- number of full thresholds (lua/includes/streak.lua extendStreak). Without a zone change
-- smp <= sp. Period numbers are dates a zone change carries over as the new calendar's own, so
-- the change maps `sm` onto the new calendar (moveCalendar below): after a move east the work's
-- instant can be in a later period there, which is covered: a move east neither skips a local
-- day (New York 23:00, then Tokyo 00:30 two days on: Tokyo's yesterday holds the work) nor
-- extends twice for one instant (New York 16:00, then Tokyo at once, 05:00 the next day there).
-- Extending still needs a period past both, so a zone that alternates (two devices) extends at
-- most once a period number; and only work moves `sm`, so alternating without work keeps
-- nothing alive.
local function lastCovered()
  local last, met = S[I_SP], S[I_SMP]
  if not last then return nil end
  if met and met > last then return met end
  return last
end

-- A zone change: `sm` read on the new calendar (`nowPeriod` and `calendar` are the new zone's:
-- {lost-at if covered in nowPeriod, lost-at if in nowPeriod - 1, start of nowPeriod, start of
-- nowPeriod - 1}, instants in ms from Node's periods.ts). Work older than the previous period
-- covers nothing the stored `sp` does not. The period's accumulated values stay only when they
-- were all sent in the new calendar's current period (`sqa`, the instant of the first, is in it:
-- a zone of the same offset, another name of the zone); else they start again, since a value
-- sent later under the same period number would meet the threshold with another day's work.
local function moveCalendar(nowPeriod, calendar)
  if not R.streak then return end
  local metAt, metIn = S[I_SM], false
  if metAt and metAt >= calendar[3] then
    metIn = nowPeriod
  elseif metAt and metAt >= calendar[4] then
    metIn = nowPeriod - 1
  end
  if S[I_SMP] ~= metIn then put(I_SMP, metIn) end
  if S[I_SQ] then put(I_SQ, (S[I_SQA] or 0) >= calendar[3] and nowPeriod or false) end
end

-- The user's live streak in the shard's deadline index ({t:s}:sd, the instant it is lost), on the
-- calendar `nowPeriod` and `calendar` were computed in (moveCalendar above; Node's periods.ts in
-- the user's zone). Called after a zone change (the streak continues on the new local calendar,
-- and so does its deadline: rankings, the streak boards and the expiry sweep read the index) and
-- after a settlement. A streak last covered after nowPeriod (a zone to the west) gets the earlier
-- of the two, and is placed again by the sweep when that passes; one covered before nowPeriod - 1
-- is lost on the new calendar and is due now, for the sweep to settle.
local function placeDeadline(nowPeriod, calendar)
  if not R.streak then return end
  local length, last = S[I_SL] or 0, lastCovered()
  if length == 0 or last == nil then return end
  local lostAt = now
  if last >= nowPeriod then
    lostAt = calendar[1]
  elseif last == nowPeriod - 1 then
    lostAt = calendar[2]
  end
  rcall('ZADD', prefix .. 'sd', lostAt, userId)
end
