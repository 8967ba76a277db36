--[[
  Leaderboards in real time (trophy-compat §3.7, §5.6): the boards this call changes, in the
  per-shard sorted set of the current run, {t:s}:lb:<board>:<run>[:<breakdown value>].
  Needs: S/U/set (state.lua), P (points.lua), R, `now`, `prefix`, `userId`.

  R.lb[i] = {k, by = 'metric'|'points'|'streak', sys = index into R.sys|false,
             bd = 'ua:<attr>'|false}; runs[i] is the current run of board i, or false when the
  board is scheduled or finished (Node computes runs from the service clock, in UTC).
  The user's entry of each board is kept in S['lb:<board>'] = {run, value, reachedAt, breakdown}.
  Values: metric boards the metric's total within the run (micro-units), points boards the
  points earned within the run, streak boards the current streak length (0 leaves the board).
  Members are "<13 digits of (MAX - reachedAt)>|<userId>": among equal values, Redis orders
  first the one who reached the value first (src/domain/leaderboards.ts).
]]
local MAX_MS = 9999999999999

-- "3,-,0" → {3, false, 0}: the current run of each board of R.lb ("-": not active).
local function parseRuns(text)
  local runs, i = {}, 0
  for token in string.gmatch(text, '[^,]+') do
    i = i + 1
    runs[i] = tonumber(token) or false
  end
  return runs
end

local function boardMember(reachedAt)
  return string.format('%013d|%s', MAX_MS - reachedAt, userId)
end

local function boardKey(board, run, breakdown)
  local key = prefix .. 'lb:' .. board.k .. ':' .. run
  if breakdown ~= '' then key = key .. ':' .. breakdown end
  return key
end

-- metricDelta: the event's value for metric boards of this metric (0 elsewhere);
-- streakLength: the new streak length when the streak changed (extended, lost, restored), else nil.
local function updateBoards(runs, metricDelta, streakLength, outParts)
  for i, board in ipairs(R.lb) do
    local run = runs[i]
    local breakdown = board.bd and (U[board.bd] or '') or ''
    -- A breakdown board ranks only users who have the attribute.
    if run and not (board.bd and breakdown == '') then
      local delta, absolute = 0, nil
      if board.by == 'metric' then
        delta = metricDelta
      elseif board.by == 'points' then
        local o = P[board.sys]
        if o and #o.recs > 0 then delta = o.added end
      elseif streakLength then
        absolute = streakLength
      end
      if delta ~= 0 or absolute then
        local field = 'lb:' .. board.k
        local entry = S[field]
        local current = (entry and entry[1] == run) and entry or nil
        local old = current and current[2] or nil
        local new = absolute or ((old or 0) + delta)
        if current then rcall('ZREM', boardKey(board, run, current[4]), boardMember(current[3])) end
        if absolute == 0 then
          set(field, nil)
        else
          rcall('ZADD', boardKey(board, run, breakdown), new, boardMember(now))
          set(field, { run, new, now, breakdown })
        end
        boardOut[#boardOut + 1] = { board.k, run, old or false, new, breakdown, current and current[3] or false }
        outParts[#outParts + 1] = string.format('b:%s:%d:%s:%d', board.k, run, old and string.format('%d', old) or '', new)
      end
    end
  end
end
