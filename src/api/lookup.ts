import type { CompiledMetric, CompiledSystem, CompiledTenant } from "../config/compiled.js";
import { fail } from "../domain/errors.js";
import { quoted } from "./body.js";

/** Configured objects named in a path: unknown → 404 with the key (DESIGN: decisions). */
export function systemOf(tenant: CompiledTenant, key: string): CompiledSystem {
  return tenant.systemByKey.get(key) ?? fail("POINTS_SYSTEM_NOT_FOUND", `Points system not found: ${quoted(key)}`);
}

export function metricOf(tenant: CompiledTenant, key: string): CompiledMetric {
  return tenant.metricByKey.get(key) ?? fail("METRIC_NOT_FOUND", `Metric not found: ${quoted(key)}`);
}
