import type { Logger } from "pino";
import typia, { type tags } from "typia";
import type { Clock } from "../clock.js";
import { fail, LaurelError } from "../domain/errors.js";
import type { EventInput } from "../domain/outcome.js";
import { errorAnswer, type ApiReply, type ApiRequest, type ErrorAnswer, type Router } from "../http/router.js";
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
 * Events in flight at once. They are sent in the batch's order, so Redis runs them in that order:
 * the batch is recorded as its events would be sent one by one to the event route (ties on a
 * board included), without a round trip each. Each next event goes as soon as the one 32 before
 * it is answered, so Redis is not left idle while Node turns replies into calls. Bounded so that
 * a batch puts at most this many scripts (~40 µs each in Redis) ahead of the event route's calls
 * on the shared connection.
 */
export const BATCH_IN_FLIGHT = 32;

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
 * failure (unreachable, out of memory) or an unexpected one stops the batch: the events in flight
 * are answered, and the ones after them are listed as not sent. When no event was recorded the
 * answer is the stopping failure's status and error (else the first failure's), so that a
 * retried 5xx sends again only what was not recorded.
 *
 * `logFailure`: the router's (Router.logFailure), so that an event's failure is logged as a
 * request's, its refusals sharing the router's throttle.
 */
export function batchEventsHandler(tenants: Tenants, clock: Clock, logger: Logger, logFailure: Router["logFailure"]) {
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
    const { accepted, rejected, stoppedAt } = await recordInOrder(store, inputs, {
      resent: (input, eventId) => logResent(logger, tenant.id, input, eventId),
      failed: (err, answer, index) => logFailure(err, answer, { index }, "batch event failed"),
    });
    if (accepted > 0) return { status: 202, body: { accepted, rejected } };
    // Nothing recorded. When Redis (or a fault) stopped the batch, its failure is the answer, a
    // 5xx the SDK retries, even after an event's own failure (a total out of range): answered
    // that event's 4xx, a client that drops a refused batch lost the events never sent. Else the
    // first event, always sent, failed.
    const answer = stoppedAt === null ? rejected[0]! : rejected.find((r) => r.index === stoppedAt)!;
    return { status: answer.status, body: { error: `body[${answer.index}]: ${answer.error}` } };
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

/** What recordInOrder reports as it goes, for the log. */
interface BatchLog {
  resent(input: EventInput, eventId: string): void;
  failed(err: unknown, answer: ErrorAnswer, index: number): void;
}

/** What a user's event without a zone waits for: their earlier events that sent one, when any sent a zone other than the cached. */
function zoneMovesBefore(zoned: { zones: Set<string>; done: Promise<unknown> } | undefined, cached: string): Promise<unknown> | undefined {
  if (zoned === undefined) return undefined;
  for (const zone of zoned.zones) if (zone !== cached) return zoned.done;
  return undefined;
}

async function recordInOrder(store: TenantStore, inputs: readonly EventInput[], log: BatchLog): Promise<{ accepted: number; rejected: Rejected[]; stoppedAt: number | null }> {
  const rejected: Rejected[] = [];
  let accepted = 0;
  // The first event whose failure (Redis's, or an unexpected one) stopped the batch.
  let stoppedAt: number | null = null;
  // Each event's outcome recorded, by index.
  const settled: Promise<void>[] = [];
  // Per user, the last event sent without a zone: a later event of the user that sends one waits
  // for it. An event without `tz` is sent on the zone this process has cached for the user (UTC
  // when none); when the stored zone differs, the script refuses it and it is sent again on that
  // zone once its reply is back (TenantStore.recordEvent), after the calls sent meanwhile. The
  // user's later event that sends a zone (never refused for it), sent beside it, was recorded
  // first (found by an audit): the earlier event's name overwrote its own, it took an idempotency
  // key both carried (the earlier event's value became the replay), and the zone it set judged
  // the earlier event. Events that send no zone need not wait: each is refused and sent again
  // alike, in the batch's order.
  // The other way round: a user's event without `tz` after their event that sends a zone other
  // than the cached one, both in flight, went on the cached zone, was refused (the earlier event
  // had stored its zone) and sent again after the events sent meanwhile: another user's later
  // event was recorded before it (its rank on a board, the ties between them). It waits for the
  // earlier event (found by the rules property's batches, test/property/rules.property.test.ts).
  // It waits for all of the user's earlier events that sent a zone, when any of them sent one
  // other than the cached: the last alone was not enough, when it was a replay of an earlier one
  // (the same Idempotency-Key) that sent the cached zone but stored none, behind an event that
  // moved the zone (found by the same property in CI, FC_SEED=1379847807).
  const zoneless = new Map<string, Promise<void>>();
  const zoned = new Map<string, { zones: Set<string>; done: Promise<unknown> }>();
  let next = 0;
  for (; next < inputs.length && stoppedAt === null; next++) {
    if (next >= BATCH_IN_FLIGHT) await settled[next - BATCH_IN_FLIGHT];
    const input = inputs[next]!;
    const before = input.tz === null ? zoneMovesBefore(zoned.get(input.userId), store.zones.get(input.userId) ?? "UTC") : zoneless.get(input.userId);
    if (before) await before;
    // A failure seen while waiting stops the batch here.
    if (stoppedAt !== null) break;
    const index = next;
    // recordEvent writes its call before its first await: calls go in the batch's order.
    const done = store.recordEvent(input).then(
      (recorded) => {
        accepted++;
        if (recorded.outcome.kind === "resent") log.resent(input, recorded.outcome.eventId);
      },
      (err: unknown) => {
        const answer = errorAnswer(err, false);
        log.failed(err, answer, index);
        if (answer.kind !== "request" && (stoppedAt === null || index < stoppedAt)) stoppedAt = index;
        rejected.push({ index, status: answer.status, error: answer.message });
      },
    );
    settled.push(done);
    if (input.tz === null) zoneless.set(input.userId, done);
    else {
      const earlier = zoned.get(input.userId);
      zoned.set(input.userId, earlier === undefined ? { zones: new Set([input.tz]), done } : { zones: earlier.zones.add(input.tz), done: Promise.all([earlier.done, done]) });
    }
  }
  await Promise.all(settled);
  for (let index = next; index < inputs.length; index++) {
    rejected.push({ index, status: 503, error: `Not sent: the batch stopped when event ${stoppedAt} failed; send it again` });
  }
  // Failures are pushed as their replies come; the answer lists them in the batch's order.
  rejected.sort((a, b) => a.index - b.index);
  return { accepted, rejected, stoppedAt };
}
