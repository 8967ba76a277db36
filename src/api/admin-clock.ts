import typia from "typia";
import { ManualClock, type Clock } from "../clock.js";
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

/**
 * POST /admin/v1/clock {"now": "<ISO 8601 instant>"} sets the service time; GET reads it.
 * Only with LAUREL_CLOCK=manual; otherwise the path does not exist (404). Needs an admin key.
 */
export function setClockHandler(tenants: Tenants, clock: Clock) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    if (!(clock instanceof ManualClock)) fail("CLOCK_NOT_MANUAL");
    tenants.authenticateAdmin(req.apiKey);
    const body = validated(parseJson(req.body), validateClockBody);
    // Date.parse is lenient (2026-02-30 becomes 2 March); the calendar date must exist.
    const ms = ISO_INSTANT.test(body.now) && parseDay(body.now.slice(0, 10)) !== null ? Date.parse(body.now) : NaN;
    if (!Number.isFinite(ms)) fail("INVALID_VALUE", "now must be an ISO 8601 instant with a zone, e.g. 2026-03-29T01:30:00Z");
    // Answers once the work that became due (time triggers, expiries) has run.
    await clock.set(ms);
    return { status: 200, body: { now: new Date(ms).toISOString() } };
  };
}

export function getClockHandler(tenants: Tenants, clock: Clock) {
  return (req: ApiRequest): ApiReply => {
    if (!(clock instanceof ManualClock)) fail("CLOCK_NOT_MANUAL");
    tenants.authenticateAdmin(req.apiKey);
    return { status: 200, body: { now: new Date(clock.now()).toISOString() } };
  };
}
