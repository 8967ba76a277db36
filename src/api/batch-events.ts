import type { Logger } from "pino";
import typia, { type tags } from "typia";
import type { Clock } from "../clock.js";
import { fail, LaurelError } from "../domain/errors.js";
import type { EventInput } from "../domain/outcome.js";
import { errorAnswer, type ApiReply, type ApiRequest, type ErrorAnswer } from "../http/router.js";
import { LogThrottle } from "../log-throttle.js";
import type { TenantStore } from "../store/tenant-store.js";
import type { Tenants } from "../tenants.js";
import { parseJsonArray, quoted, validated } from "./body.js";
import { checkedEvent, checkValue, logResent, type EventFields } from "./events.js";

/**
 * POST /admin/v1/metrics/events: up to 1000 events in one request (Trophy's admin API,
 * BatchMetricEvent; trophy-compat §5.2, §6.4). Each event is the event route's body with its
 * metric's key and, instead of the header, its own idempotency key.
 */
interface BatchEvent extends EventFields {
  key: string;
  idempotencyKey?: string | null;
}

export const MAX_BATCH_EVENTS = 1000;
/** The batch's body limit, as a multiple of the event route's: 1000 events of about 1 KiB (1 MiB by default). */
export const BATCH_BODY_FACTOR = 16;

const validateBatch = typia.createValidateEquals<BatchEvent[] & tags.MinItems<1> & tags.MaxItems<typeof MAX_BATCH_EVENTS>>();

/**
 * Events sent at once. A window's calls are written in the batch's order, so Redis runs them in
 * that order: the batch is recorded as its events would be sent one by one to the event route
 * (ties on a board included), with one round trip per window instead of per event. Bounded so
 * that a batch puts at most this many scripts (~40 µs each in Redis) ahead of the event
 * route's calls on the shared connection.
 */
export const BATCH_WINDOW = 32;

/** An event of the batch that was not recorded, as the answer lists it. */
interface Rejected {
  index: number;
  status: number;
  error: string;
}

/**
 * Every event is checked first, as the event route checks its body; one refused refuses the
 * batch with nothing recorded, and the message names its index. Then the events are recorded in
 * the batch's order, each as the event route records it (the same script: idempotency, triggers,
 * streaks, boards, webhooks), and the answer comes when all are: 202 `{accepted, rejected}`. An
 * event that fails then (a total out of range, a zone that kept changing) is listed in
 * `rejected` with the status and error the event route would answer; the others go on. A Redis
 * failure (unreachable, out of memory) or an unexpected one stops the batch after its window:
 * the events after it are listed as not sent. When no event was recorded the answer is the first
 * failure's status and error, so that a retried 5xx sends again only what was not recorded.
 */
export function batchEventsHandler(tenants: Tenants, clock: Clock, logger: Logger) {
  // As the router logs a request Redis refused at maxmemory: once per 30 s (http/router.ts).
  const outOfMemoryLog = new LogThrottle();
  return async (req: ApiRequest): Promise<ApiReply> => {
    const { tenant, store } = tenants.authenticateAdmin(req.apiKey);
    const events = validated(parseJsonArray(req.body), validateBatch);
    const now = clock.now();
    const inputs = events.map((event, index) =>
      namingIndex(index, () => {
        if (!tenant.metricByKey.has(event.key)) fail("METRIC_NOT_FOUND", `Metric not found: ${quoted(event.key)}`);
        checkValue(event);
        return checkedEvent(tenant, event.key, event, event.idempotencyKey ?? null, "idempotencyKey", now);
      }),
    );
    const { accepted, rejected, stoppedBy } = await recordInWindows(store, inputs, (input, eventId) => logResent(logger, tenant.id, input, eventId), logger);
    if (stoppedBy?.kind === "out-of-memory") {
      outOfMemoryLog.run((unlogged) => logger.error({ err: stoppedBy.message, unlogged }, "redis is out of memory (maxmemory): a batch of events stopped"));
    }
    if (accepted > 0) return { status: 202, body: { accepted, rejected } };
    // Nothing recorded: the first event, sent in the first window, failed.
    const first = rejected[0]!;
    return { status: first.status, body: { error: `body[${first.index}]: ${first.error}` } };
  };
}

/** A refusal of one event's checks, its message led by the event's index in the body. */
function namingIndex<T>(index: number, check: () => T): T {
  try {
    return check();
  } catch (err) {
    if (err instanceof LaurelError) throw new LaurelError(err.code, `body[${index}]: ${err.message}`);
    throw err;
  }
}

/**
 * Where the window that starts at `start` ends: after BATCH_WINDOW events, or sooner, before an
 * event that sends a zone for a user whose earlier event in the window sends none. That earlier
 * event is sent on the zone this process has cached for the user (UTC when none); when the stored
 * zone differs, the script refuses it and it is sent again on that zone once its reply is back
 * (TenantStore.recordEvent), after the calls sent beside it. Sent in the same window, the user's
 * later event that sends a zone (never refused for it) was recorded first (found by an audit):
 * the earlier event's name overwrote its own, it took an idempotency key both carried (the
 * earlier event's value became the replay), and the zone it set judged the earlier event. In the
 * next window it is sent once the earlier one is recorded, as the event route takes them one by
 * one. A window of one user's events that all send no zone stays whole: each is refused and sent
 * again alike, in the batch's order.
 */
function windowEnd(inputs: readonly EventInput[], start: number): number {
  const end = Math.min(inputs.length, start + BATCH_WINDOW);
  const zoneless = new Set<string>();
  for (let i = start; i < end; i++) {
    const { userId, tz } = inputs[i]!;
    if (tz === null) zoneless.add(userId);
    // Never at `start`: the set is empty there, so a window holds at least one event.
    else if (zoneless.has(userId)) return i;
  }
  return end;
}

async function recordInWindows(
  store: TenantStore,
  inputs: readonly EventInput[],
  onResent: (input: EventInput, eventId: string) => void,
  logger: Logger,
): Promise<{ accepted: number; rejected: Rejected[]; stoppedBy: ErrorAnswer | null }> {
  // In the batch's order: the events sent and not recorded, then any not sent.
  const rejected: Rejected[] = [];
  let accepted = 0;
  // The first event whose failure (Redis's, or an unexpected one) stopped the batch, and how.
  let stoppedAt: number | null = null;
  let stoppedBy: ErrorAnswer | null = null;
  let start = 0;
  for (let end = 0; start < inputs.length && stoppedAt === null; start = end) {
    end = windowEnd(inputs, start);
    const window = inputs.slice(start, end);
    // recordEvent writes its call before its first await: the map sends them in order.
    const results = await Promise.allSettled(window.map((input) => store.recordEvent(input)));
    results.forEach((result, k) => {
      const index = start + k;
      if (result.status === "fulfilled") {
        accepted++;
        if (result.value.outcome.kind === "resent") onResent(window[k]!, result.value.outcome.eventId);
        return;
      }
      const answer = errorAnswer(result.reason, false);
      if (answer.kind === "internal") logger.error({ err: result.reason, index }, "batch event failed");
      if (answer.kind !== "request" && stoppedAt === null) {
        stoppedAt = index;
        stoppedBy = answer;
      }
      rejected.push({ index, status: answer.status, error: answer.message });
    });
  }
  for (let index = start; index < inputs.length; index++) {
    rejected.push({ index, status: 503, error: `Not sent: the batch stopped when event ${stoppedAt} failed; send it again` });
  }
  return { accepted, rejected, stoppedBy };
}
