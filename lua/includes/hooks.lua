--[[
  The webhook selection, made when a record is written (README: Webhooks, "Exactly one event id
  per change"). Every script that appends a record to its shard stream {t:s}:x does it through
  appendRecord, in the same atomic call as the change: the record goes to the shard stream as
  always and, when the tenant has an endpoint and the record has a part one of its endpoints'
  types wants, also to the shard's hook stream {t:s}:xh (the same hash tag, so the same slot),
  which is all the webhook consumer reads. A tenant without endpoints pays one test.

  The hook stream's entry carries the record's fields plus "x", the entry id the record got in
  the shard stream: event ids derive from it (src/jobs/webhooks/kinds.ts streamEventId), so they
  are what they were when the consumer read the shard stream itself.

  `W`, what the tenant's endpoints want (the rules' R.wh, built from kinds.ts WANTED_PARTS by
  tenantHookParts):
    false        no endpoint: nothing goes to the hook stream
    true         every record (a user boost's "ub" record: it schedules the boost's boundaries)
    a table      the wanted parts, each a key set to true:
      a    a part "a:..."                              achievement.completed
      p    a part "p:..."                              points.changed
      L    a part "p:sys:added:total:lvBefore:lvAfter[:lastAward]" with lvBefore ~= lvAfter   points.level_changed
      s    a part "s:..."                              streak.extended
      S    the part "s:1"                              streak.started
      sl   a part "sl:..."                             streak.lost
      fc   a part "fc:..."                             streak.freeze_consumed
      fe   a part "fe:..." or "fa:..."                 streak.freeze_earned
      b    a part "b:..."                              leaderboard.rank_changed
  The selection may keep a record that kinds.ts recordEvents turns into no event (a points part
  with nothing added, say): the consumer filters by endpoint in Node anyway. It never drops one
  that stands for a wanted type (test/integration/webhook-select.test.ts holds it to recordEvents).
]]
local function hookWanted(parts, W)
  for i = 1, #parts do
    local part = parts[i]
    local c, colon = string.byte(part, 1, 2)
    if colon == 58 then
      -- A one-letter kind: "a:", "p:", "s:", "b:".
      if c == 112 then
        if W.p then return true end
        if W.L then
          -- The two level indexes are the fifth and sixth fields ("p:sys:added:total:lvBefore:
          -- lvAfter:lastAward"; a record of an earlier build, lua/hookUpgrade-3.lua, ends at lvAfter).
          -- A pattern (~5k instructions), only for an endpoint on level changes without points.changed.
          local before, after = string.match(part, '^p:[^:]*:[^:]*:[^:]*:(%d+):(%d+)')
          if before ~= after then return true end
        end
      elseif c == 97 then
        if W.a then return true end
      elseif c == 115 then
        if W.s or (W.S and part == 's:1') then return true end
      elseif c == 98 then
        if W.b then return true end
      end
    elseif colon then
      -- "sl:", "fc:", "fe:", "fa:" (an admin grant is a freeze earned too), "sr:" (no event), "c".
      local kind = string.sub(part, 1, 2)
      if kind == 'fa' then kind = 'fe' end
      if W[kind] then return true end
    end
  end
  return false
end

-- redis.call, taken at the first call (a Function library cannot reach it while it loads); reaching
-- it through the globals on every call costs ~0.5k instructions more.
local hookCall

--[[
  Appends one record: XADD stream * k kind u user t now z zone e detail o <parts joined by ";">
  (every writer's fields, in this order: the stream worker reads them by position), and the same
  fields plus "x", the entry id just added, to the hook stream stream.."h" when W selects the
  record (above). Returns the shard stream's entry id. Fixed arguments, no varargs: the call is
  the whole price for a tenant without endpoints. A script that declares the hook stream in KEYS
  (lua/streakAdmin-9.lua, timeTick-4.lua) declares this same name.
]]
local function appendRecord(stream, W, kind, user, now, zone, detail, parts)
  local call = hookCall
  if not call then
    call = redis.call
    hookCall = call
  end
  -- One part (most records) is its own text: table.concat would make the same string again.
  local outcome = parts[2] and table.concat(parts, ';') or parts[1] or ''
  local id = call('XADD', stream, '*', 'k', kind, 'u', user, 't', now, 'z', zone, 'e', detail, 'o', outcome)
  if W and (W == true or hookWanted(parts, W)) then
    call('XADD', stream .. 'h', '*', 'k', kind, 'u', user, 't', now, 'z', zone, 'e', detail, 'o', outcome, 'x', id)
  end
  return id
end
