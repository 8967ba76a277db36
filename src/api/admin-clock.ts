import typia from "typia";
import type { ManualClock } from "../clock.js";
import { fail } from "../domain/errors.js";
import { parseDay } from "../domain/periods.js";
import type { ApiReply, ApiRequest } from "../http/router.js";
import type { Tenants } from "../tenants.js";
import { parseJson, validated } from "./body.js";

interface ClockBody {
  now: string;
}
const validateClockBody = typia.createValidateEquals<ClockBody>();

/** ISO 8601 instant with an explicit zone (Z or ±hh:mm); a local time would be ambiguous. */
const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})$/;

const LATEST_CLOCK_MS = Date.UTC(2200, 0, 1);

/**
 * POST /admin/v1/clock {"now": "<ISO 8601 instant>"} sets the service time; GET reads it.
 * Registered only with LAUREL_CLOCK=manual (src/app.ts); otherwise the path does not exist (404).
 * Needs an admin key.
 */
export function setClockHandler(tenants: Tenants, clock: ManualClock) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    tenants.authenticateAdmin(req.apiKey);
    const body = validated(parseJson(req.body), validateClockBody);
    if (!ISO_INSTANT.test(body.now)) fail("INVALID_VALUE", "now must be an ISO 8601 instant with a zone, e.g. 2026-03-29T01:30:00Z");
    // Date.parse is lenient (2026-02-30 becomes 2 March); the calendar date must exist.
    if (parseDay(body.now.slice(0, 10)) === null) fail("INVALID_VALUE", `now names a day that does not exist (${body.now.slice(0, 10)})`);
    const ms = Date.parse(body.now);
    if (!Number.isFinite(ms)) fail("INVALID_VALUE", "now must be an ISO 8601 instant with a zone, e.g. 2026-03-29T01:30:00Z");
    // Dates are YYYY-MM-DD in every zone, and board members hold 13 digits of milliseconds
    // (src/domain/leaderboards.ts boardMember): years 1970 to 2199.
    if (ms < 0 || ms >= LATEST_CLOCK_MS) fail("INVALID_VALUE", "now must be from 1970-01-01T00:00:00Z to 2199-12-31T23:59:59.999Z");
    // Answers once the work that became due (time triggers, expiries) has run.
    await clock.set(ms);
    return { status: 200, body: { now: new Date(ms).toISOString() } };
  };
}

export function getClockHandler(tenants: Tenants, clock: ManualClock) {
  return (req: ApiRequest): ApiReply => {
    tenants.authenticateAdmin(req.apiKey);
    return { status: 200, body: { now: new Date(clock.now()).toISOString() } };
  };
}
