--[[
  Records the first attempts the webhook consumer made itself (src/jobs/webhooks/first-attempt.ts)
  as jobs of the tenant's BullMQ delivery queue, in BullMQ 6.7's own layout, so the admin API,
  GET /metrics, replays and the queue's workers see them as any other job:

    delivered  the job hash as BullMQ's moveToFinished leaves a completed job (atm 1, returnvalue,
               finishedOn) and its id in the completed set, which is then trimmed as
               removeOnComplete {age, count} trims it;
    retry      the job hash as BullMQ leaves a job whose attempt failed and will be retried
               (atm 1, failedReason, the attempt's log line), and its id in the delayed set at
               now + delay (or in the wait list when the delay is 0), with the queue's marker
               set so a blocked worker wakes for it;
    dead       the same failed job put in the failed set (a queue whose deliveries get 1 attempt).

    answered   a late first attempt's 2xx (the consumer stopped waiting for it and wrote it as a
               retry): the job, while it still waits in the delayed set (no worker took it over),
               becomes the delivered job above (returnvalue, finishedOn, out of the delayed set);
               otherwise nothing is written.
    late-failure  a late first attempt's failure: the job, while it waits in the delayed set, gets
               the failure as its failedReason and its log line; its retry stays as it is.

  Any other job id the queue already holds is left alone, as BullMQ's add leaves it. BullMQ's events
  stream gets no entry (nothing of Laurel's reads it for these; settled() counts the sets).
  test/integration/webhook-first-attempt.test.ts reads what this writes through BullMQ's API, so
  an upgrade of BullMQ that changes its layout fails there.

  KEYS[1] completed  KEYS[2] delayed  KEYS[3] wait  KEYS[4] marker  KEYS[5] failed
  ARGV[1] key prefix of the queue's jobs ("{laurel-jobs}:laurel-hooks-<tenant>:")
  ARGV[2] now (ms)
  ARGV[3] delivered jobs kept: max age (s)   ARGV[4] delivered jobs kept: max count
  ARGV[5] the jobs' opts (JSON, as BullMQ stores them)
  ARGV[6 ..] per job, 8 values: kind ("delivered" | "retry" | "dead" | "answered" | "late-failure"), job id, name,
    data (JSON), attempt start (ms), then for delivered and answered: returnvalue (JSON), the answer's instant (ms), "";
    for retry, dead and late-failure (whose delay is not read):
    failedReason, delay before the retry (ms), the attempt's log line

  Reply: the number of jobs written (ids already held are not counted)
]]
--@body
local rcall = redis.call
local completedKey, delayedKey, waitKey, markerKey, failedKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local prefix, now, opts = ARGV[1], tonumber(ARGV[2]), ARGV[5]
local keepAge, keepCount = tonumber(ARGV[3]), tonumber(ARGV[4])

local function removeJobs(ids)
  for _, id in ipairs(ids) do rcall('DEL', prefix .. id, prefix .. id .. ':logs') end
end

-- BullMQ's getDelayedScore: the due instant × 0x1000, plus a counter among jobs due in the same ms.
local function delayedScore(due)
  local low, high = due * 0x1000, (due + 1) * 0x1000 - 1
  local top = rcall('ZREVRANGEBYSCORE', delayedKey, high, low, 'WITHSCORES', 'LIMIT', 0, 1)
  if top[2] then return math.min(high, tonumber(top[2]) + 1) end
  return low
end

local written, delivered, queued = 0, 0, false
for i = 6, #ARGV, 8 do
  local kind, id, name, data, at = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local jobKey = prefix .. id
  if kind == 'answered' then
    if rcall('ZREM', delayedKey, id) == 1 then
      local finished = ARGV[i + 6]
      rcall('HSET', jobKey, 'delay', 0, 'finishedOn', finished, 'returnvalue', ARGV[i + 5])
      rcall('ZADD', completedKey, finished, id)
      written, delivered = written + 1, delivered + 1
    end
  elseif kind == 'late-failure' then
    if rcall('ZSCORE', delayedKey, id) then
      rcall('HSET', jobKey, 'failedReason', ARGV[i + 5])
      rcall('RPUSH', jobKey .. ':logs', ARGV[i + 7])
      written = written + 1
    end
  elseif rcall('EXISTS', jobKey) == 0 then
    written = written + 1
    if kind == 'delivered' then
      local finished = ARGV[i + 6]
      rcall('HSET', jobKey, 'name', name, 'data', data, 'opts', opts, 'timestamp', at, 'delay', 0, 'priority', 0,
        'processedOn', at, 'finishedOn', finished, 'returnvalue', ARGV[i + 5], 'atm', 1, 'ats', 1)
      rcall('ZADD', completedKey, finished, id)
      delivered = delivered + 1
    else
      local delay = tonumber(ARGV[i + 6])
      rcall('HSET', jobKey, 'name', name, 'data', data, 'opts', opts, 'timestamp', at, 'delay', delay, 'priority', 0,
        'processedOn', at, 'failedReason', ARGV[i + 5], 'stacktrace', '[]', 'atm', 1, 'ats', 1)
      rcall('RPUSH', jobKey .. ':logs', ARGV[i + 7])
      if kind == 'dead' then
        rcall('HSET', jobKey, 'finishedOn', now)
        rcall('ZADD', failedKey, now, id)
      elseif delay > 0 then
        rcall('ZADD', delayedKey, delayedScore(now + delay), id)
        queued = true
      else
        rcall('LPUSH', waitKey, id)
        rcall('ZADD', markerKey, 0, '0')
      end
    end
  end
end

-- BullMQ's addDelayMarkerIfNeeded: the marker holds the next due instant of the delayed set.
if queued then
  local first = rcall('ZRANGE', delayedKey, 0, 0, 'WITHSCORES')
  if first[2] then rcall('ZADD', markerKey, tonumber(first[2]) / 0x1000, '1') end
end

-- removeOnComplete {age, count}, as BullMQ's removeJobsByMaxAge and removeJobsByMaxCount trim.
if delivered > 0 then
  local old = rcall('ZREVRANGEBYSCORE', completedKey, now - keepAge * 1000, '-inf', 'LIMIT', 0, 1000)
  if #old > 0 then
    removeJobs(old)
    rcall('ZREM', completedKey, unpack(old))
  end
  local over = rcall('ZCARD', completedKey) - keepCount
  if over > 0 then
    removeJobs(rcall('ZRANGE', completedKey, 0, over - 1))
    rcall('ZREMRANGEBYRANK', completedKey, 0, over - 1)
  end
end
return written
