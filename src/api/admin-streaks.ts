import typia, { type tags } from "typia";
import type { Clock } from "../clock.js";
import { fail } from "../domain/errors.js";
import type { ApiReply, ApiRequest } from "../http/router.js";
import type { Tenants } from "../tenants.js";
import { streakAdmin } from "../store/user-store.js";
import { parseJson, validated } from "./body.js";
import { checkUserId } from "./user-input.js";

/**
 * Admin streak operations (trophy-compat §2.2 #25, #26, §3.9): grant freezes, restore streaks.
 * Partial success is a 200 with `issues`; each issue carries the SDK's fields (userId, level,
 * reason) and the current API's (severity, message), so both clients parse it.
 */
interface FreezesBody {
  freezes: { userId: string }[] & tags.MinItems<1> & tags.MaxItems<1000>;
}
interface RestoreBody {
  users: { id: string }[] & tags.MinItems<1> & tags.MaxItems<100>;
}
const validateFreezes = typia.createValidateEquals<FreezesBody>();
const validateRestore = typia.createValidateEquals<RestoreBody>();

interface Issue {
  userId: string;
  level: "error" | "warning";
  reason: string;
  severity: "error" | "warning";
  message: string;
}

function issue(userId: string, level: Issue["level"], reason: string): Issue {
  return { userId, level, reason, severity: level, message: reason };
}

/** Restore windows (trophy-compat §2.2 #25): 90 days (daily), one year (weekly), two years (monthly). */
const RESTORE_WINDOW = { daily: 90, weekly: 52, monthly: 24 } as const;

/** POST /admin/v1/streaks/freezes {freezes: [{userId}]}: one freeze per entry, up to the maximum. */
export function grantFreezesHandler(tenants: Tenants, clock: Clock) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    const { tenant, store } = tenants.authenticateAdmin(req.apiKey);
    const body = validated(parseJson(req.body), validateFreezes);
    body.freezes.forEach((f, i) => checkUserId(f.userId, `freezes[${i}].userId`));
    if (!tenant.streak?.freezes) fail("FEATURE_DISABLED", "Streak freezes are not enabled for this tenant");
    const counts = new Map<string, number>();
    for (const f of body.freezes) counts.set(f.userId, (counts.get(f.userId) ?? 0) + 1);
    const issues: Issue[] = [];
    const now = clock.now();
    for (const [userId, asked] of counts) {
      const result = await streakAdmin(store, userId, "freeze", now, () => asked);
      if (result.status === "missing") issues.push(issue(userId, "error", "User does not exist"));
      else if (result.status === "frozen" && result.granted < asked) issues.push(issue(userId, "warning", "Would exceed maximum freeze limit"));
      // "already-applied": the grant ran before a dropped connection lost its reply; what it
      // granted went with that reply, so no issue is reported for it.
    }
    return { status: 200, body: { issues } };
  };
}

/** POST /admin/v1/streaks/restore {users: [{id}]}: back to the longest length within the window. */
export function restoreStreaksHandler(tenants: Tenants, clock: Clock) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    const { tenant, store } = tenants.authenticateAdmin(req.apiKey);
    const body = validated(parseJson(req.body), validateRestore);
    body.users.forEach((u, i) => checkUserId(u.id, `users[${i}].id`));
    const rule = tenant.streak ?? fail("FEATURE_DISABLED", "This tenant has no streak");
    const restoredUsers: string[] = [];
    const issues: Issue[] = [];
    const now = clock.now();
    for (const userId of new Set(body.users.map((u) => u.id))) {
      const result = await streakAdmin(store, userId, "restore", now, (nowPeriod) => nowPeriod - RESTORE_WINDOW[rule.frequency]);
      if (result.status === "missing") issues.push(issue(userId, "error", "User does not exist"));
      else if (result.status === "nothing-to-restore") issues.push(issue(userId, "warning", "No streak to restore"));
      else if (result.status === "already-longest") issues.push(issue(userId, "warning", "Streak is already at maximum length"));
      else restoredUsers.push(userId);
    }
    return { status: 200, body: { restoredUsers, issues } };
  };
}
