--[[
  Upgrade from the version whose webhook consumer read the shard stream itself (its group
  `webhooks` on {t:s}:x): moves the records that group had not finished to the shard's hook
  stream {t:s}:xh, which the consumer now reads, then removes the group. Run by every process
  with webhooks at start (src/jobs/webhooks/upgrade.ts), before it writes anything; a no-op
  once the group is gone.

  Which records: the group's pending entries (read by an old consumer that did not acknowledge
  them: it may have queued their deliveries, which the same event ids make harmless), then the
  records after its last delivered entry up to the cutover. The cutover is the shard stream's
  last id when a process of this version first ran this script, kept with HSETNX so that
  processes and restarts agree: records after it were written by this version's scripts, which
  select into the hook stream themselves. The old processes must be stopped before the new
  ones start (README: Operations): an old writer's later records would not be selected, and an
  old consumer would re-create the group.

  Each moved record is selected as the writers select (includes/hooks.lua) for what the
  tenant's endpoints want now, and appended to the hook stream with "x", its entry id in the
  shard stream, so its event ids are those the old consumer would have derived. Each call moves
  at most n records and acknowledges them in the old group (or moves its last delivered id) in
  the same atomic call: a crash between calls loses and repeats nothing.

  KEYS[1] shard stream {t:s}:x
  KEYS[2] hook stream  {t:s}:xh
  KEYS[3] watermarks   {t:s}:xw   (field "webhooks:cutover")
  ARGV[1] the old group's name ("webhooks")
  ARGV[2] n, the most records to look at in this call
  ARGV[3 ..] the wanted parts of the tenant's endpoints (kinds.ts WANTED_PARTS)

  Reply {looked at, appended to the hook stream, done 0/1}
]]
-- @include "stream/ids.lua"
-- @include "stream/trim.lua"
-- @include "includes/hooks.lua"
--@body
local rcall = redis.call
local stream, hooks, marks = KEYS[1], KEYS[2], KEYS[3]
local group, n = ARGV[1], tonumber(ARGV[2])
local CUTOVER = 'webhooks:cutover'

local old
if rcall('EXISTS', stream) == 1 then
  for _, info in ipairs(rcall('XINFO', 'GROUPS', stream)) do
    local f = {}
    for k = 1, #info, 2 do f[info[k]] = info[k + 1] end
    if f['name'] == group then old = f end
  end
end
if not old then
  rcall('HDEL', marks, CUTOVER)
  return { 0, 0, 1 }
end

local streamInfo = rcall('XINFO', 'STREAM', stream)
for k = 1, #streamInfo, 2 do
  if streamInfo[k] == 'last-generated-id' then rcall('HSETNX', marks, CUTOVER, streamInfo[k + 1]) end
end
local cutover = rcall('HGET', marks, CUTOVER)

local W = {}
for w = 3, #ARGV do W[ARGV[w]] = true end
local appended = 0
local function move(id, fields)
  if not fields or idCompare(id, cutover) > 0 then return end
  local kind, outcome = nil, ''
  for j = 1, #fields, 2 do
    if fields[j] == 'k' then kind = fields[j + 1] elseif fields[j] == 'o' then outcome = fields[j + 1] end
  end
  local parts = {}
  for part in string.gmatch(outcome, '[^;]+') do parts[#parts + 1] = part end
  if kind == 'ub' or hookWanted(parts, W) then
    fields[#fields + 1] = 'x'
    fields[#fields + 1] = id
    rcall('XADD', hooks, '*', unpack(fields))
    appended = appended + 1
  end
end

-- 1. Entries an old consumer read and did not acknowledge (a trimmed one has no fields left).
local pending = rcall('XPENDING', stream, group, '-', '+', n)
if #pending > 0 then
  local ids = {}
  for i = 1, #pending do
    local id = pending[i][1]
    local entry = rcall('XRANGE', stream, id, id)[1]
    move(id, entry and entry[2])
    ids[i] = id
  end
  rcall('XACK', stream, group, unpack(ids))
  return { #ids, appended, 0 }
end

-- 2. What the group had not read yet, up to the cutover.
local entries = rcall('XRANGE', stream, '(' .. old['last-delivered-id'], cutover, 'COUNT', n)
for i = 1, #entries do move(entries[i][1], entries[i][2]) end
if #entries == n then
  rcall('XGROUP', 'SETID', stream, group, entries[#entries][1])
  return { #entries, appended, 0 }
end
rcall('XGROUP', 'DESTROY', stream, group)
rcall('HDEL', marks, CUTOVER)
trimStream(stream, nil)
return { #entries, appended, 1 }
