--[[
  The board order among equal values, on one shard's set of a run (no other include needed).

  Board order is the set's descending order (ZREVRANGE): higher values first, and among equal
  values the greater member first (members are "<13 digits of MAX - reachedAt>|<userId>", so the
  one who reached the value first; src/domain/leaderboards.ts). Equal values occupy one run of
  descending positions, [above, above + ties), their members descending.

  Members are compared byte by byte, as Redis orders them (memcmp): Lua's own `<` on strings
  follows the server's collation locale (strcoll; redis-server calls setlocale(LC_COLLATE, "")),
  which under a locale such as en_US.UTF-8 is not byte order.
]]

-- Whether member a comes after member b in byte order (so a ranks ahead of b at equal values).
-- Every member is at least 15 bytes ("<13 digits>|<id>"); its first 12 are compared as three
-- big-endian integers (struct: one C call a member), which mostly settles it: equal values are
-- mostly reached at different instants. A byte loop is ~20 C calls.
local function memberAfter(a, b)
  if a == b then return false end
  local unpack4 = struct.unpack
  local a1, a2, a3 = unpack4('>I4I4I4', a)
  local b1, b2, b3 = unpack4('>I4I4I4', b)
  if a1 ~= b1 then return a1 > b1 end
  if a2 ~= b2 then return a2 > b2 end
  if a3 ~= b3 then return a3 > b3 end
  local la, lb = #a, #b
  local n = la < lb and la or lb
  local byte = string.byte
  for i = 13, n do
    local x, y = byte(a, i), byte(b, i)
    if x ~= y then return x > y end
  end
  return la > lb
end

-- How many members of `list` (descending) come after `member`: a bisection, as they form a prefix.
local function leadingAfter(list, member)
  local lo, hi = 1, #list + 1
  while lo < hi do
    local mid = lo + (hi - lo - (hi - lo) % 2) / 2
    if memberAfter(list[mid], member) then lo = mid + 1 else hi = mid end
  end
  return lo - 1
end

-- Equal values read at once; beyond that many, positions are bisected through Redis first,
-- until TIE_WINDOW candidates are left, read at once. A member read costs a Lua string (~1.5k
-- instructions); a bisection step a ZREVRANGE of one entry (O(log n), ~4k): past a few, a step
-- halves more strings than it costs. 64 and 64 before: a value shared by thousands (a new board)
-- read 128 members a shard where 16 + 8 and a few more steps do.
local TIE_PAGE = 16
local TIE_WINDOW = 8

-- How many entries of `key` with exactly `value` (a score as text) rank ahead of `member`: those
-- with a greater member. `above` is the count of entries strictly above the value. Most values
-- are shared by few entries: one read of them (greatest member first), bisected here. Beyond
-- TIE_PAGE the last tie is looked at first (a member that reached the value last, every event's
-- own, has them all ahead), then positions are bisected by ZREVRANGE of one entry until TIE_WINDOW
-- candidates are left, read at once: O(log n × log(ties / TIE_WINDOW) + TIE_PAGE + TIE_WINDOW).
-- `seen`, when given (a table per key and value), keeps what was read of the value's entries that
-- does not depend on the member (the first page, the count, the last), for the next member asked
-- about on the same key and value (boardPlaces-1.lua: the places of one batch's requests); and
-- bounds the caller knows from other members' answers: `floor`, a greater member's (this one has
-- at least as many ahead), and `ceiling`, a lesser member's (at most as many).
local function tiesAhead(key, above, value, member, seen)
  local call = redis.call
  local page = seen and seen.page
  if not page then
    page = call('ZREVRANGEBYSCORE', key, value, value, 'LIMIT', 0, TIE_PAGE)
    if seen then seen.page = page end
  end
  if #page < TIE_PAGE or not memberAfter(page[TIE_PAGE], member) then return leadingAfter(page, member) end
  local ties = seen and seen.ties
  if not ties then
    ties = call('ZCOUNT', key, value, value)
    if seen then seen.ties = ties end
  end
  if ties == TIE_PAGE then return ties end
  local lastMember = seen and seen.last
  if not lastMember then
    local last = above + ties - 1
    lastMember = call('ZREVRANGE', key, last, last)[1]
    if seen then seen.last = lastMember end
  end
  if memberAfter(lastMember, member) then return ties end
  -- Ties are numbered 0.. in board order; the first one not ahead is in [lo, hi], and hi is not.
  local lo, hi = TIE_PAGE, ties - 1
  if seen then
    if seen.floor and seen.floor > lo then lo = seen.floor end
    if seen.ceiling and seen.ceiling < hi then hi = seen.ceiling end
  end
  while hi - lo > TIE_WINDOW do
    local mid = lo + (hi - lo - (hi - lo) % 2) / 2
    if memberAfter(call('ZREVRANGE', key, above + mid, above + mid)[1], member) then lo = mid + 1 else hi = mid end
  end
  if lo == hi then return lo end
  return lo + leadingAfter(call('ZREVRANGE', key, above + lo, above + hi - 1), member)
end

-- The same for a member that reached its value last (a change made now by the call's user,
-- already stored): every equal value is ahead of it but itself and those reached in the same
-- millisecond by a smaller id, all at the end of the run of equal values. Looked at from the end:
-- one or two ZREVRANGE of one entry; past a few, tiesAhead. `ties`: the count of entries with
-- exactly `value` (the caller has counted them).
local function tiesAheadOfLatest(key, above, value, member, ties)
  local call = redis.call
  local i = ties - 1
  for _ = 1, 4 do
    if i < 0 then return 0 end
    if memberAfter(call('ZREVRANGE', key, above + i, above + i)[1], member) then return i + 1 end
    i = i - 1
  end
  return tiesAhead(key, above, value, member)
end
