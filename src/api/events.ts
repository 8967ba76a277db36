import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import typia from "typia";
import type { Clock } from "../clock.js";
import { MAX_EVENT_VALUE, toMicro } from "../domain/decimal.js";
import { fail } from "../domain/errors.js";
import { settledStreak, viewStreak } from "../domain/streak.js";
import { RawJson, renderedOnce } from "../http/raw-json.js";
import type { ApiRequest, ApiReply } from "../http/router.js";
import type { TenantContext, Tenants } from "../tenants.js";
import type { RecordedEvent } from "../store/tenant-store.js";
import type { CompiledMetric, CompiledTenant } from "../config/compiled.js";
import type { EventInput } from "../domain/outcome.js";
import { parseJson, quoted, validated } from "./body.js";
import { eventLeaderboardsJson } from "./leaderboards.js";
import { pointsMapJson } from "./points-json.js";
import { checkAttributes, profileZone, userProfileFields, type UserInput } from "./user-input.js";
import { achievementJson, metricTotalJson, streakText } from "./wire.js";

/** Body of POST /v1/metrics/{key}/event (spec: Record a metric event; trophy-compat §3.2): EventFields. */
const validateEventBody = typia.createValidateEquals<EventFields>();
const MAX_IDEMPOTENCY_KEY = 255;
/**
 * An Idempotency-Key is visible ASCII (and spaces), as header values should be (RFC 9110 §5.5).
 * Other bytes do not reach Laurel intact: this uWS build hands a header's bytes above 0x7F to
 * JavaScript as Latin-1 characters and drops them at either end of the value, so "order-é"
 * arrives as "order-" and would replay another key's event. Those in the middle are seen, and
 * refused here; those at the ends cannot be (README: Idempotency).
 */
const IDEMPOTENCY_KEY_TEXT = /^[\x20-\x7e]+$/;

/** Refuses values JSON can carry but no total should (1e400 parses as Infinity): 422, not 400. */
export function checkValue(raw: { value?: unknown }): void {
  const value = raw.value;
  if (typeof value !== "number") return;
  if (!Number.isFinite(value)) fail("INVALID_VALUE", "value must be a finite number");
  if (Math.abs(value) > MAX_EVENT_VALUE) fail("INVALID_VALUE", `value must be between -${MAX_EVENT_VALUE} and ${MAX_EVENT_VALUE}`);
}

export function recordEventHandler(tenants: Tenants, clock: Clock, logger: Logger) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    const context = tenants.authenticate(req.apiKey);
    const { tenant, store } = context;
    const metricKey = req.params[0]!;
    const metric = tenant.metricByKey.get(metricKey);
    if (!metric) fail("METRIC_NOT_FOUND", `Metric not found: ${quoted(metricKey)}`);
    const raw = parseJson(req.body);
    checkValue(raw);
    const body = validated(raw, validateEventBody);
    const now = clock.now();
    const input = checkedEvent(tenant, metricKey, body, req.idempotencyKey, "Idempotency-Key", now);
    const recorded = await store.recordEvent(input);
    if (recorded.outcome.kind === "resent") logResent(logger, tenant.id, input, recorded.outcome.eventId);
    return eventReply(context, metric, body.user.id, now, recorded, input.idempotencyKey);
  };
}

/** An event of the event route or of a batch, its fields past their schema. */
export interface EventFields {
  user: UserInput;
  value: number;
  attributes?: Record<string, string> | null;
}

/**
 * The checks an event's fields get after their schema's, one rule for the event route and the
 * batch (batch-events.ts), and the event as the store takes it, with a new event id.
 * `keyName` names the idempotency key in the message: the route's header, or a batch event's field.
 */
export function checkedEvent(tenant: CompiledTenant, metricKey: string, body: EventFields, idempotencyKey: string | null, keyName: string, now: number): EventInput {
  const profile = userProfileFields(body.user, tenant.userAttributes);
  const eventAttributes = checkAttributes(body.attributes ?? null, tenant.eventAttributes, "attributes");
  if (idempotencyKey !== null && (idempotencyKey.length === 0 || idempotencyKey.length > MAX_IDEMPOTENCY_KEY || !IDEMPOTENCY_KEY_TEXT.test(idempotencyKey))) {
    fail("INVALID_BODY", `${keyName} must be 1-${MAX_IDEMPOTENCY_KEY} visible ASCII characters or spaces`);
  }
  return {
    metricKey,
    userId: body.user.id,
    now,
    eventId: randomUUID(),
    idempotencyKey,
    valueMicro: toMicro(body.value),
    // In IANA's spelling, as the profile stores it: the calendar's zone, the process's zone
    // cache and the stream record all take this one.
    tz: profileZone(profile),
    profile,
    eventAttributes,
  };
}

/** A call re-sent on a new connection that Redis had applied already (lua/includes/call-order.lua). */
export function logResent(logger: Logger, tenantId: string, input: Pick<EventInput, "metricKey" | "userId">, eventId: string): void {
  logger.warn({ tenant: tenantId, metric: input.metricKey, user: input.userId, eventId }, "event re-sent after a dropped Redis connection was already recorded: counted once, answered without its changes");
}

/**
 * The reply's opening, rendered once per metric: `metricId` and `metricName` (spec: Metric, "The
 * response carries metricId (uuid string) and metricName (string)"; the SDK's EventResponse
 * keeps fields it does not declare).
 */
const replyHead = renderedOnce((metric: CompiledMetric) => `{"metricId":"${metric.id}","metricName":${JSON.stringify(metric.name)},`);

export function eventReply(
  context: TenantContext,
  metric: CompiledMetric,
  userId: string,
  now: number,
  recorded: RecordedEvent,
  idempotencyKey: string | null,
): ApiReply {
  const { tenant } = context;
  const { outcome } = recorded;
  const processed = outcome.kind === "processed";
  // A re-sent call (ResentEvent) is the first answer its request gets: 201, not a replay; its
  // changes went with the lost reply, so it lists none.
  const replayed = outcome.kind === "replay";
  // The spec's Event response as one text (raw-json.ts): JSON.stringify per top-level field,
  // as stringifyReply does for a reply with RawJson parts, was ~20k of the event call's ~171k
  // instructions (bench/README.md, "The sixteenth stop"). Ids are UUIDs and dates ASCII digits:
  // nothing to escape but the idempotency key.
  const achievements = processed ? outcome.achievements.map((key) => JSON.stringify(achievementJson(tenant, tenant.achievementByKey.get(key)!, now))).join(",") : "";
  const streak = viewStreak(tenant.streak, settledStreak(tenant, outcome.streak, recorded.nowDay, recorded.nowPeriod), recorded.nowDay, recorded.nowPeriod);
  const points = processed ? pointsMapJson(tenant, userId, outcome.points).text : "{}";
  const boards = processed ? eventLeaderboardsJson(tenant, outcome.boards).text : "{}";
  let text =
    `${replyHead(metric)}"eventId":"${outcome.eventId}","total":${metricTotalJson(outcome.totalMicro)},"achievements":[${achievements}],` +
    `"currentStreak":${streakText(streak, processed && outcome.extended)},"points":${points},"leaderboards":${boards}`;
  if (idempotencyKey !== null) text += `,"idempotencyKey":${JSON.stringify(idempotencyKey)},"idempotentReplayed":${replayed}`;
  const body = new RawJson(`${text}}`);
  return { status: replayed ? 202 : 201, body };
}
