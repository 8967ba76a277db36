import typia, { type tags } from "typia";
import type { Clock } from "../clock.js";
import { fail, LaurelError } from "../domain/errors.js";
import { errorAnswer, type ApiReply, type ApiRequest, type Router } from "../http/router.js";
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

/**
 * Applies `apply` to each user in turn, one script each; `take` files the result and says whether
 * it recorded something. The SDK sends a request answered 5xx again at once, twice (trophy-compat
 * §1.4), so once this request has recorded something a failure part way must not be answered
 * with one: the users before it would be granted their freezes again. So: a user whose zone kept
 * changing (ZONE_CHANGING: nothing written for that user, the others untouched) is an issue and
 * the batch goes on; any other failure (Redis unreachable or refusing writes, a fault) stops it,
 * and that user and each user not yet applied are issues (errors) of the 200. When nothing was
 * recorded, the first failure is the answer, as for a single user (sending it again is harmless).
 */
async function applyInTurn<R>(
  userIds: readonly string[],
  apply: (userId: string) => Promise<R>,
  take: (userId: string, result: R) => boolean,
  issues: Issue[],
  logFailure: Router["logFailure"],
): Promise<void> {
  let recorded = false;
  let first: { err: unknown } | null = null;
  for (let i = 0; i < userIds.length; i++) {
    const userId = userIds[i]!;
    let result: R;
    try {
      result = await apply(userId);
    } catch (err) {
      first ??= { err };
      const answer = errorAnswer(err, false);
      logFailure(err, answer, { userId }, "streak admin operation failed");
      issues.push(issue(userId, "error", answer.message));
      if (err instanceof LaurelError && err.code === "ZONE_CHANGING") continue;
      for (const rest of userIds.slice(i + 1)) issues.push(issue(rest, "error", `Not applied: the request stopped at user ${userId} (${answer.message}); send it again`));
      break;
    }
    if (take(userId, result)) recorded = true;
  }
  if (first !== null && !recorded) throw first.err;
}

/** POST /admin/v1/streaks/freezes {freezes: [{userId}]}: one freeze per entry, up to the maximum. */
export function grantFreezesHandler(tenants: Tenants, clock: Clock, logFailure: Router["logFailure"]) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    const { tenant, store } = tenants.authenticateAdmin(req.apiKey);
    const body = validated(parseJson(req.body), validateFreezes);
    body.freezes.forEach((f, i) => checkUserId(f.userId, `freezes[${i}].userId`));
    if (!tenant.streak?.freezes) fail("FEATURE_DISABLED", "Streak freezes are not enabled for this tenant");
    const counts = new Map<string, number>();
    for (const f of body.freezes) counts.set(f.userId, (counts.get(f.userId) ?? 0) + 1);
    const issues: Issue[] = [];
    const now = clock.now();
    await applyInTurn(
      [...counts.keys()],
      (userId) => streakAdmin(store, userId, "freeze", now, () => counts.get(userId)!),
      (userId, result) => {
        if (result.status === "missing") issues.push(issue(userId, "error", "User does not exist"));
        else if (result.status === "frozen" && result.granted < counts.get(userId)!) issues.push(issue(userId, "warning", "Would exceed maximum freeze limit"));
        // "already-applied": the grant ran before a dropped connection lost its reply; what it
        // granted went with that reply, so no issue is reported for it.
        return result.status === "already-applied" || (result.status === "frozen" && result.granted > 0);
      },
      issues,
      logFailure,
    );
    return { status: 200, body: { issues } };
  };
}

/** POST /admin/v1/streaks/restore {users: [{id}]}: back to the longest length within the window. */
export function restoreStreaksHandler(tenants: Tenants, clock: Clock, logFailure: Router["logFailure"]) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    const { tenant, store } = tenants.authenticateAdmin(req.apiKey);
    const body = validated(parseJson(req.body), validateRestore);
    body.users.forEach((u, i) => checkUserId(u.id, `users[${i}].id`));
    const rule = tenant.streak ?? fail("FEATURE_DISABLED", "This tenant has no streak");
    const restoredUsers: string[] = [];
    const issues: Issue[] = [];
    const now = clock.now();
    await applyInTurn(
      [...new Set(body.users.map((u) => u.id))],
      (userId) => streakAdmin(store, userId, "restore", now, (nowPeriod) => nowPeriod - RESTORE_WINDOW[rule.frequency]),
      (userId, result) => {
        if (result.status === "missing") issues.push(issue(userId, "error", "User does not exist"));
        else if (result.status === "nothing-to-restore") issues.push(issue(userId, "warning", "No streak to restore"));
        else if (result.status === "already-longest") issues.push(issue(userId, "warning", "Streak is already at maximum length"));
        else {
          restoredUsers.push(userId);
          return true;
        }
        return false;
      },
      issues,
      logFailure,
    );
    return { status: 200, body: { restoredUsers, issues } };
  };
}
