import type { CompiledMetric, CompiledTenant } from "../config/compiled.js";
import { fromMicro } from "../domain/decimal.js";
import type { ApiReply, ApiRequest } from "../http/router.js";
import { ReadPlan } from "../store/read-plan.js";
import { readStoreOf } from "../store/read-store.js";
import type { Tenants } from "../tenants.js";
import { planUserAchievements, userAchievementList, type UserAchievementState } from "./achievements.js";
import { failUserNotFound, metricOf } from "./lookup.js";
import { checkUserId } from "./user-input.js";
import { achievementJson } from "./wire.js";

/**
 * GET /v1/users/{id}/metrics and GET /v1/users/{id}/metrics/{key} (trophy-compat §2.2 #10,
 * #11; §3.5 MetricResponse): the user's total per metric, with the metric's achievements the
 * user has completed or can still complete (achievedAt null). `status` is always "active"
 * (the SDK requires it, trophy-compat §6.1; Laurel has no archived metrics). One script call.
 */
function metricJson(tenant: CompiledTenant, metric: CompiledMetric, totalMicro: number, state: UserAchievementState) {
  const achievements = tenant.achievements.filter((a) => a.type === "metric" && a.metric === metric.key);
  return {
    id: metric.id,
    key: metric.key,
    name: metric.name,
    status: "active",
    current: fromMicro(totalMicro),
    achievements: userAchievementList(achievements, state, true).map((a) => achievementJson(tenant, a, state.achievedAt.get(a.key) ?? null)),
  };
}

async function readMetrics(tenants: Tenants, req: ApiRequest, pick: (tenant: CompiledTenant) => CompiledMetric[]) {
  const { tenant, store } = tenants.authenticate(req.apiKey);
  const userId = req.params[0]!;
  checkUserId(userId, "user id");
  const metrics = pick(tenant);
  const plan = new ReadPlan(store.slots);
  const totals = plan.state(metrics.map((m) => `m:${m.key}`));
  const decode = planUserAchievements(plan, tenant);
  const result = await readStoreOf(store).runPlan(userId, plan);
  if (result === null) failUserNotFound(userId);
  const state = decode(result);
  return metrics.map((m, i) => metricJson(tenant, m, (result[totals]![i] as number | null) ?? 0, state));
}

export function userMetricsHandler(tenants: Tenants) {
  return async (req: ApiRequest): Promise<ApiReply> => ({ status: 200, body: await readMetrics(tenants, req, (t) => t.metrics) });
}

export function userMetricHandler(tenants: Tenants) {
  return async (req: ApiRequest): Promise<ApiReply> => {
    const [metric] = await readMetrics(tenants, req, (t) => [metricOf(t, req.params[1]!)]);
    return { status: 200, body: metric };
  };
}
