--[[
  Leaderboards in real time (trophy-compat §3.7, §5.6). Needs: S/U/set (state.lua), P
  (points.lua), R, `now`, `prefix`, `userId`.

  A run's participants are one sorted set per shard, {t:s}:lb:<board>:<run>[:<breakdown>]. A
  breakdown board also lists a run's groups per shard in {t:s}:lg:<board>:<run> (a set, added to
  with the first entry of the run in a group), which run retention reads instead of scanning the
  keyspace for the groups (src/jobs/run-retention.ts).
  R.lb[i] = {k, by = 'metric'|'points'|'streak', sys = index into R.sys|false,
             bd = 'ua:<attr>'|false, style = 'competition'|'dense'|'ordinal', max}
  boards[i] (from Node, boardsOf) = {run, threshold, run text, falls, room, added, read at} of board i, or false when the
  board is scheduled or finished. The user's entry of the board's latest run is kept in five
  state positions (scalars: cheaper to decode and encode than a table each, and no table made per
  change): lb:<board> the run, lbv: the value, lbm: the zset member (which holds reachedAt),
  lbk: the breakdown group, lbr: the rank given at that change. A state of an earlier version holds a table
  {run, value, reachedAt, breakdown, rank} at lb:<board>, read as such (boardEntry).
  Values: metric boards the metric's total within the run (micro-units), points boards the
  points earned within the run, streak boards the current streak length (0 leaves the board).
  Members are "<13 digits of (MAX - reachedAt)>|<userId>": among equal values Redis orders first
  the one who reached the value first (src/domain/leaderboards.ts).

  Ranks for the reply are counted here, over every shard's set of the run: the one place a
  script reads keys of other shards (standalone Redis; see README, Leaderboards). A value below
  the board's threshold (the value at position max, refreshed by Node at most a second ago; -inf
  while the board has room), or equal to it and reached after the threshold was read (behind the
  entry at the cutoff), is off the board and costs no count. Unless the user's own entry may
  have held a place before (falling, it frees it), the board's values fell since the threshold
  was read (fellSince), or the board is a breakdown board (NaN: Node keeps no threshold per
  group): then the place is counted (updateBoards). A value above the threshold is counted too
  (rankOf), and the place decides: the threshold may be a second too low.
]]
local MAX_MS = 9999999999999
-- @include "includes/board-order.lua"

-- The boards argument of every script that moves boards: R.lb's current runs, thresholds and
-- what was read with each threshold (the run's falls counter, the room left, the entries
-- counter, the instant it was read: src/store/thresholds.ts), as little-endian doubles in `blob`
-- from byte `at` (six per board; run -1 while a board is scheduled or finished; Node's
-- TenantStore.boardNumbers). Binary because `tonumber` of decimal text costs ~1.8k instructions
-- (strtod). Returns per board {run, threshold, run text, falls, room, added, read at} or false.
-- A run's text is kept on the board's rules table (a Function library keeps it across calls), so
-- Lua's printf (~3.5k instructions) happens once per run, not once per call; so are the list and
-- each board's {run, threshold, run text, falls, room, added, read at}, refilled per call instead of made (a table each otherwise).
local callBoards = {}
local function boardsOf(blob, at)
  local lb = R.lb
  if #lb == 0 then return lb end
  for i = 1, #lb do
    local board = lb[i]
    local run, threshold, falls, room, added, readAt
    run, threshold, falls, room, added, readAt, at = struct.unpack('<dddddd', blob, at)
    if run < 0 then
      callBoards[i] = false
    else
      if board.runNumber ~= run then board.runNumber, board.runText = run, string.format('%d', run) end
      local info = board.info
      if not info then info = {}; board.info = info end
      info[1], info[2], info[3], info[4], info[5], info[6], info[7] = run, threshold, board.runText, falls, room, added, readAt
      callBoards[i] = info
    end
  end
  return callBoards
end

local function boardMember(reachedAt, user)
  return string.format('%013d|%s', MAX_MS - reachedAt, user)
end

-- The member a change made now by this call's user gets: the same on every board it moves, so
-- it is formatted once per call and user (a printf and an interned string each time otherwise).
local memberAt, memberOf, memberNow
local function currentMember()
  if memberAt ~= now or memberOf ~= userId then
    memberAt, memberOf, memberNow = now, userId, boardMember(now, userId)
  end
  return memberNow
end

-- Each board's state positions and its run key's constant part, resolved once per library load.
for i = 1, #R.lb do
  local board = R.lb[i]
  board.ri, board.vi, board.mi = SLOT['lb:' .. board.k], SLOT['lbv:' .. board.k], SLOT['lbm:' .. board.k]
  board.ki, board.rki = SLOT['lbk:' .. board.k], SLOT['lbr:' .. board.k]
  board.kp = 'lb:' .. board.k .. ':'
end

-- Rank number of (value, member) by the board's style (the model's modelRank, src/domain/model.ts).
-- board.keys holds every shard's "{t:s}:lb:<board>:" (built once per library load).
-- The run's key in every shard; kept for the last run asked (a Function library keeps it across
-- calls, so the 16 concatenations happen once per run instead of once per event).
local function runKeys(board, runText, breakdown)
  local suffix = breakdown ~= '' and (runText .. ':' .. breakdown) or runText
  if board.runSuffix ~= suffix then
    local keys = {}
    for s = 1, #board.keys do keys[s] = board.keys[s] .. suffix end
    board.runSuffix, board.runKeys = suffix, keys
  end
  return board.runKeys
end

-- The run's key on this call's shard, and the head "b:<board>:<run>:" of the record's part,
-- kept per board for its latest run (a Function library keeps them across calls): the
-- concatenations and the interning of their result happen once per shard and run, not per event.
local function shardRunKey(board, runText)
  if board.rkRun ~= runText then
    board.rkRun, board.rkByPrefix, board.partHead = runText, {}, 'b:' .. board.k .. ':' .. runText .. ':'
  end
  local key = board.rkByPrefix[prefix]
  if not key then
    key = prefix .. board.kp .. runText
    board.rkByPrefix[prefix] = key
  end
  return key
end

-- The user's entry in an earlier run than the state's latest (the manual clock was set back into
-- it: README, Leaderboards, A clock set back), which the state does not keep: value, member,
-- breakdown, rank given (nil: none). Looked for in the run's sets on this shard (on a breakdown
-- board, every group the run lists here): first the member the run's rank history names last,
-- confirmed by its score, else by a ZSCAN for the user's id (O(n) of the shard's set: only after
-- the clock was set back). The rank given at the user's last change in the run is the history's
-- newest `r`: a change pushes an entry whenever it or the one before it was ranked
-- (src/store/leaderboard-store.ts pastEntry reads a past run's entry so too).
local function pastEntry(board, runText)
  local runKey = shardRunKey(board, runText)
  local keys, groups = { runKey }, { '' }
  if board.bd then
    groups = rcall('SMEMBERS', prefix .. 'lg:' .. board.k .. ':' .. runText)
    keys = {}
    for g = 1, #groups do keys[g] = runKey .. ':' .. groups[g] end
  end
  local newest = rcall('LINDEX', prefix .. 'lh:' .. board.k .. ':' .. runText .. ':' .. userId, 0)
  local rank, t, v = nil, nil, nil
  if newest then
    rank = tonumber(string.match(newest, '"r":(%d+)'))
    t, v = tonumber(string.match(newest, '"t":(%d+)')), tonumber(string.match(newest, '"v":(%-?%d+)'))
  end
  if v then
    local member = boardMember(t, userId)
    for g = 1, #keys do
      if tonumber(rcall('ZSCORE', keys[g], member)) == v then return v, member, groups[g], rank end
    end
  end
  -- A member is "<13 digits>|<user id>": the id's glob characters escaped.
  local pattern = string.rep('?', 13) .. '|' .. (string.gsub(userId, '[%*%?%[%]\\]', '\\%0'))
  for g = 1, #keys do
    local cursor = '0'
    repeat
      local page = rcall('ZSCAN', keys[g], cursor, 'MATCH', pattern, 'COUNT', 1000)
      cursor = page[1]
      if #page[2] > 0 then return tonumber(page[2][2]), page[2][1], groups[g], rank end
    until cursor == '0'
  end
  return nil
end

-- The user's entry of the board's run `run`: value, member, breakdown, rank given (nil: none),
-- and whether `run` is earlier than the state's latest run (its entry is not the state's). The
-- state keeps the entry of the latest run the user moved in, so a later run holds none of the
-- user's. (A streak board's entry that leaves empties them: a streak board has one run.)
local function boardEntry(board, run, runText)
  local stored = S[board.ri]
  if stored == run then return S[board.vi], S[board.mi], S[board.ki] or '', S[board.rki] or nil end
  if type(stored) == 'table' then
    if stored[1] == run then return stored[2], boardMember(stored[3], userId), stored[4], stored[5] or nil end
    stored = stored[1]
  end
  if stored and stored > run then
    local value, member, breakdown, rank = pastEntry(board, runText)
    return value, member, breakdown, rank, true
  end
  return nil
end

-- The run's counters (README, Leaderboards: the threshold), a hash {t}:lbc:<board>:<run> that
-- Node reads with each threshold (src/store/thresholds.ts), so a script can tell what changed
-- since: `f`, falls of entries that may have held a place (a threshold read before a fall can be
-- above the board's real one: it is trusted to leave a value off only while `f` has not moved),
-- and `n`, entries added (a user's first in the run: while the participants read plus those
-- added fit, the board has room). A tenant key, read by scripts of every shard like the rank
-- count's sets (standalone Redis).
local function countersKey(board, info)
  return board.ck .. info[3]
end

local function countersNow(board, info, field)
  return tonumber(rcall('HGET', countersKey(board, info), field) or 0)
end

-- Whether the board's values may have fallen since Node read the threshold `info` carries.
local function fellSince(board, info)
  return countersNow(board, info, 'f') ~= info[4]
end

-- Counts the fall of an entry from `old`: one that may have held a place, by this call's
-- threshold (at or above it), or by any threshold when this one may itself be too high (the
-- counter moved since it was read; a threshold of -inf, room, is below every value).
local function countFall(board, info, old)
  if old >= info[2] or fellSince(board, info) then rcall('HINCRBY', countersKey(board, info), 'f', 1) end
end

-- The rank by the board's style of (value, member), a change made now by this call's user (so
-- behind every equal value but those reached in the same millisecond by a smaller id), or nil
-- off the board: when its place (the entries above, then the equal values ahead:
-- includes/board-order.lua) is beyond max. The threshold that let the count run is up to a second
-- old (values may have risen past it since, or filled a board that had room), so the place is
-- always settled here: a rank beyond max is off the board (a rank is never beyond the place);
-- otherwise the equal values are counted, and only when they do not all fit on the board is
-- the place counted tie by tie. The shard tables are kept by the library (refilled per call).
local ABOVE, EQUAL = {}, {}
local function rankOf(board, runText, breakdown, value, member, info)
  local keys = runKeys(board, runText, breakdown)
  local strictlyAbove = sformat('(%.17g', value)
  local above, rank = 0, nil
  if board.style == 'dense' then
    local seen, distinct = {}, 0
    for s = 1, #keys do
      local list = rcall('ZRANGEBYSCORE', keys[s], strictlyAbove, '+inf', 'WITHSCORES')
      ABOVE[s] = #list / 2
      above = above + #list / 2
      for j = 2, #list, 2 do
        if not seen[list[j]] then
          seen[list[j]] = true
          distinct = distinct + 1
        end
      end
    end
    rank = distinct + 1
  else
    for s = 1, #keys do
      local n = rcall('ZCOUNT', keys[s], strictlyAbove, '+inf')
      ABOVE[s] = n
      above = above + n
    end
    rank = above + 1
  end
  if rank > board.max then return nil end
  -- A board that still has room lists every place (src/store/thresholds.ts: the participants
  -- now are at most those read plus the entries added since, this one's included); an ordinal
  -- rank is the place itself, counted below.
  local ordinal = board.style == 'ordinal'
  if not ordinal and info[5] > 0 and info[5] >= countersNow(board, info, 'n') - info[6] then return rank end
  local exactly, equal = sformat('%.17g', value), 0
  for s = 1, #keys do
    local n = rcall('ZCOUNT', keys[s], exactly, exactly)
    EQUAL[s] = n
    equal = equal + n
  end
  -- equal counts the user's own entry: alone at its value, the place is above + 1.
  local position = above + 1
  if equal > 1 then
    if not ordinal and above + equal <= board.max then return rank end
    for s = 1, #keys do
      if EQUAL[s] > 0 then position = position + tiesAheadOfLatest(keys[s], ABOVE[s], exactly, member, EQUAL[s]) end
    end
  end
  if position > board.max then return nil end
  return ordinal and position or rank
end

-- A rank-history entry (src/api/leaderboards.ts reads it). Every value is an integer (ranks, and
-- values in micro-units, points or periods), so the entry is one string.format with %d, from the
-- format for the fields present (16 formats, built once per library load): each format call and
-- each number turned into text costs Lua a printf (callgrind, bench/README.md).
-- (Built with operators only: while a Function library loads, Redis hides globals such as ipairs.)
local HISTORY_FORMATS = {}
local HISTORY_NAMES = { 'pr', 'r', 'pv', 'v' }
for mask = 0, 15 do
  local format, rest = '{"t":%d', mask
  for i = 1, 4 do
    format = format .. ',"' .. HISTORY_NAMES[i] .. '":' .. ((rest % 2 == 1) and '%d' or 'null')
    rest = (rest - rest % 2) / 2
  end
  HISTORY_FORMATS[mask] = format .. '}'
end

local function historyEntry(previousRank, rank, old, new)
  local mask, values = 0, {}
  if previousRank then mask = mask + 1; values[#values + 1] = previousRank end
  if rank then mask = mask + 2; values[#values + 1] = rank end
  if old then mask = mask + 4; values[#values + 1] = old end
  if new then mask = mask + 8; values[#values + 1] = new end
  return string.format(HISTORY_FORMATS[mask], now, values[1], values[2], values[3], values[4])
end

-- metricDelta: the event's value for metric boards of this metric (0 elsewhere);
-- streakLength: the new streak length when the streak changed (extended, lost, restored), else nil.
local function updateBoards(boards, metricDelta, streakLength, outParts)
  local lb = R.lb
  for i = 1, #lb do
    local board = lb[i]
    local info = boards[i]
    local breakdown = board.bd and (U[board.bd] or '') or ''
    -- A breakdown board ranks only users who have the attribute.
    if info and not (board.bd and breakdown == '') then
      local run, runText = info[1], info[3]
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
        local old, oldMember, oldBreakdown, previousRank, past = boardEntry(board, run, runText)
        local new = absolute or ((old or 0) + delta)
        local runKey = shardRunKey(board, runText)
        if old then rcall('ZREM', oldBreakdown ~= '' and (runKey .. ':' .. oldBreakdown) or runKey, oldMember) end
        -- A breakdown board keeps no threshold (NaN): its places are always counted.
        local fell = old and (absolute == 0 or new < old) and info[2] == info[2]
        local rank = nil
        -- The five positions are written directly (false: absent), not through put(): a Lua
        -- call each otherwise. A change in an earlier run (past) leaves them to the latest run.
        stateDirty = true
        if absolute == 0 then
          if not past then S[board.ri], S[board.vi], S[board.mi], S[board.ki], S[board.rki] = false, false, false, false, false end
        else
          local member = currentMember()
          rcall('ZADD', breakdown ~= '' and (runKey .. ':' .. breakdown) or runKey, new, member)
          -- A user's first entry in the run counts (before rankOf, which bounds the participants by it).
          if not old and info[2] == info[2] then rcall('HINCRBY', countersKey(board, info), 'n', 1) end
          -- The run's first entry in a group lists the group (an entry that moved in from another
          -- group, after an attribute change, too): once per user and run, not per event.
          if breakdown ~= '' and (not old or oldBreakdown ~= breakdown) then
            rcall('SADD', prefix .. 'lg:' .. board.k .. ':' .. runText, breakdown)
          end
          -- On the board means within its first max entries: on a full board a value below the
          -- threshold (the value at position max; -inf while there is room) is off it, and costs
          -- no count. Unless the user's own entry may have held a place (falling, it frees it),
          -- the board keeps no threshold (a breakdown board: NaN), or its values fell since the
          -- threshold was read (it may be too high): then, as for a value at or above it, rankOf
          -- settles the place. A value equal to the threshold, reached now, is behind the entry
          -- at the cutoff when the threshold was read before now (info[7]: the latest time the
          -- reading process's clock had shown, so that entry reached it by then, even after a
          -- manual clock was set back); in the millisecond of the read it may not be (a smaller
          -- id reached it in that millisecond): counted.
          local threshold = info[2]
          local count = new > threshold or threshold ~= threshold or (old ~= nil and old >= threshold) or (new == threshold and now <= info[7])
          if not count then count = fellSince(board, info) end
          if count then rank = rankOf(board, runText, breakdown, new, member, info) end
          if not past then
            S[board.ri], S[board.vi], S[board.mi] = run, new, member
            S[board.ki], S[board.rki] = breakdown ~= '' and breakdown or false, rank or false
          end
        end
        if fell then countFall(board, info, old) end
        -- previousRank: the rank this user was given at their previous change in this run.
        -- History of rank changes: a change off the board before and after is not one. Trimmed
        -- to 100 past 120 (src/jobs/webhooks/payloads.ts HISTORY_KEPT tells a trimmed one by it).
        if rank or previousRank then
          local historyKey = prefix .. 'lh:' .. board.k .. ':' .. runText .. ':' .. userId
          local n = rcall('LPUSH', historyKey, historyEntry(previousRank, rank, old, absolute ~= 0 and new or nil))
          if n > 120 then rcall('LTRIM', historyKey, 0, 99) end
        end
        -- boardOut is flat, 8 values per board (the reply's order): no table per change.
        local n = #boardOut
        boardOut[n + 1], boardOut[n + 2], boardOut[n + 3], boardOut[n + 4] = board.k, run, old or false, new
        -- The threshold shown: a full board's, else 0 (room, or a breakdown board's unkept one).
        local shown = info[2]
        if shown ~= shown or shown == -math.huge then shown = 0 end
        boardOut[n + 5], boardOut[n + 6], boardOut[n + 7], boardOut[n + 8] = breakdown, rank or false, previousRank or false, shown
        -- The record's part: values before and after, then the ranks before and after ('' for
        -- none), so that the webhook consumer sends the ranks of this change (payloads.ts ranksOf)
        -- without telling it apart in the history from another of the same instant and values.
        -- A rank is a count, which %s writes as %d does; one string.format a part.
        if old then
          outParts[#outParts + 1] = sformat('%s%d:%d:%s:%s', board.partHead, old, new, previousRank or '', rank or '')
        else
          outParts[#outParts + 1] = sformat('%s:%d:%s:%s', board.partHead, new, previousRank or '', rank or '')
        end
      end
    end
  end
end
