import type { CompiledMetric, CompiledSystem, CompiledTenant } from "../config/compiled.js";
import { fail } from "../domain/errors.js";
import { quoted } from "./body.js";

/** Configured objects (and users) named in a request: unknown → 404 quoting the key or id (DESIGN: decisions). */
export function systemOf(tenant: CompiledTenant, key: string): CompiledSystem {
  return tenant.systemByKey.get(key) ?? fail("POINTS_SYSTEM_NOT_FOUND", `Points system not found: ${quoted(key)}`);
}

export function metricOf(tenant: CompiledTenant, key: string): CompiledMetric {
  return tenant.metricByKey.get(key) ?? fail("METRIC_NOT_FOUND", `Metric not found: ${quoted(key)}`);
}

/**
 * The 404 for a user id that names no user, quoting it as every 404 quotes what was sent (quoted:
 * 64 UTF-16 units at most). A valid id is up to 255 code points, so up to 510 units: quoted whole,
 * the message was eight times the README's bound.
 */
export function failUserNotFound(userId: string): never {
  return fail("USER_NOT_FOUND", `User not found: ${quoted(userId)}`);
}
