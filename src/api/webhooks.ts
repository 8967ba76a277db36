import typia, { type tags } from "typia";
import { fail } from "../domain/errors.js";
import type { ApiReply, ApiRequest, Router } from "../http/router.js";
import { DELIVERY_STATUSES, NO_DELIVERIES, type DeliveryQueue } from "../jobs/webhooks/deliveries.js";
import type { Webhooks } from "../jobs/webhooks/index.js";
import { WEBHOOK_EVENT_TYPES } from "../jobs/webhooks/kinds.js";
import type { CompiledTenant } from "../config/compiled.js";
import type { Tenants } from "../tenants.js";
import { parseJson, quoted, validated } from "./body.js";
import { enumParam, intParam } from "./query.js";

/**
 * Admin API of outbound events (admin key; README: Webhooks): the tenant's endpoints with
 * delivery counts, the deliveries (one per event and endpoint) with their status, attempts and
 * last error, one delivery with its attempt log and payload, and replays of one or many
 * (dead-lettered ones included). Deliveries are BullMQ jobs of the tenant's queue
 * (src/jobs/webhooks/deliveries.ts); a tenant without endpoints has none.
 */
interface ReplayBody {
  /** Deliveries to replay, by id. */
  ids?: (string & tags.MinLength<1> & tags.MaxLength<200>)[] & tags.MinItems<1> & tags.MaxItems<1000>;
  /** Or every delivery in this status (oldest first, up to `limit`), optionally of one endpoint or type. */
  status?: "dead" | "delivered";
  endpoint?: string & tags.MaxLength<64>;
  type?: string & tags.MaxLength<64>;
  limit?: number & tags.Type<"uint32"> & tags.Minimum<1> & tags.Maximum<1000>;
}
const validateReplay = typia.createValidateEquals<ReplayBody>();

function queueOf(webhooks: Webhooks | null, tenantId: string): DeliveryQueue | null {
  return webhooks?.deliveries(tenantId) ?? null;
}

export function registerWebhookRoutes(router: Router, tenants: Tenants, webhooks: Webhooks | null): void {
  /** GET /admin/v1/webhooks: the endpoints (secrets never shown) and the deliveries per status. */
  // The two listings answer at once, not through a promise, when the tenant has no delivery
  // queue: an async answer is taken for Redis's (read-deadline.ts), and one given during a stall
  // ended the stalled mode, so the reads after it waited the whole bound again.
  router.add("get", "/admin/v1/webhooks", 0, (req: ApiRequest): ApiReply | Promise<ApiReply> => {
    const { tenant } = tenants.authenticateAdmin(req.apiKey);
    const queue = queueOf(webhooks, tenant.id);
    const reply = (counts: typeof NO_DELIVERIES): ApiReply => ({
      status: 200,
      body: {
        endpoints: tenant.webhooks.map((w) => ({
          key: w.key,
          url: w.url,
          events: [...w.events],
          coalesce: Object.fromEntries([...w.coalesceMs].map(([type, ms]) => [type, ms / 60_000])),
          timeoutSeconds: w.timeoutMs / 1000,
          secrets: w.secrets.length,
        })),
        deliveries: counts,
      },
    });
    return queue ? queue.counts().then(reply) : reply(NO_DELIVERIES);
  });

  /** GET /admin/v1/webhooks/deliveries?status&endpoint&type&userId&limit&offset: newest first. */
  router.add("get", "/admin/v1/webhooks/deliveries", 0, (req: ApiRequest): ApiReply | Promise<ApiReply> => {
    const { tenant } = tenants.authenticateAdmin(req.apiKey);
    const q = req.query;
    // Optional: absent or empty is no filter (`status=` answered 400 "status is required" until 2026-12-05).
    const status = enumParam(q, "status", DELIVERY_STATUSES, undefined);
    const type = enumParam(q, "type", WEBHOOK_EVENT_TYPES, undefined);
    const endpoint = knownEndpoint(tenant, q.get("endpoint") || undefined);
    const limit = intParam(q, "limit", 50, 1, 500);
    const offset = intParam(q, "offset", 0, 0, 100_000);
    const queue = queueOf(webhooks, tenant.id);
    if (!queue) return { status: 200, body: { deliveries: [] } };
    return queue.list({ status, endpoint, type, userId: q.get("userId") || undefined, limit, offset }).then(({ deliveries }) => ({ status: 200, body: { deliveries } }));
  });

  /** GET /admin/v1/webhooks/deliveries/{id}: the delivery, its attempt log and its payload. */
  router.add("get", "/admin/v1/webhooks/deliveries/:id", 1, async (req: ApiRequest): Promise<ApiReply> => {
    const { tenant } = tenants.authenticateAdmin(req.apiKey);
    const id = req.params[0]!;
    const found = await queueOf(webhooks, tenant.id)?.inspect(id);
    if (!found) fail("NOT_FOUND", `Delivery not found: ${quoted(id)}`);
    return { status: 200, body: found };
  });

  /** POST /admin/v1/webhooks/deliveries/{id}/replay: sends it again (same event id and body). */
  router.add("post", "/admin/v1/webhooks/deliveries/:id/replay", 1, async (req: ApiRequest): Promise<ApiReply> => {
    const { tenant } = tenants.authenticateAdmin(req.apiKey);
    const id = req.params[0]!;
    const queue = queueOf(webhooks, tenant.id);
    const result = queue ? await queue.replay(id) : "not-found";
    if (result === "not-found") fail("NOT_FOUND", `Delivery not found: ${quoted(id)}`);
    if (result === "in-progress") fail("OUT_OF_RANGE", `Delivery ${quoted(id)} is pending or being delivered: nothing to replay`);
    return { status: 200, body: { replayed: [id], issues: [] } };
  });

  /** POST /admin/v1/webhooks/deliveries/replay {ids} | {status, endpoint?, type?, limit?}: several at once. */
  router.add("post", "/admin/v1/webhooks/deliveries/replay", 0, async (req: ApiRequest): Promise<ApiReply> => {
    const { tenant } = tenants.authenticateAdmin(req.apiKey);
    const body = validated(parseJson(req.body), validateReplay);
    if ((body.ids === undefined) === (body.status === undefined)) fail("INVALID_BODY", "give either ids or status");
    if (body.ids !== undefined && (body.endpoint !== undefined || body.type !== undefined || body.limit !== undefined)) {
      fail("INVALID_BODY", "endpoint, type and limit go with status, not with ids");
    }
    // The listing's filters, refused as it refuses them: a typo must not replay nothing with a 200.
    knownEndpoint(tenant, body.endpoint);
    if (body.type !== undefined && !(WEBHOOK_EVENT_TYPES as readonly string[]).includes(body.type)) fail("OUT_OF_RANGE", `type must be one of ${WEBHOOK_EVENT_TYPES.join(", ")}`);
    const queue = queueOf(webhooks, tenant.id);
    if (!queue) return { status: 200, body: { replayed: [], issues: (body.ids ?? []).map((id) => ({ id: id.toWellFormed(), reason: "not found" })) } };
    const ids = body.ids ?? (await queue.idsIn(body.status!, body.limit ?? 100, body.endpoint, body.type));
    const replayed: string[] = [];
    const issues: { id: string; reason: string }[] = [];
    for (const id of new Set(ids)) {
      const result = await queue.replay(id);
      if (result === "replayed") replayed.push(id);
      // Echoed well-formed: an id sent with a lone surrogate (JSON escapes it) reached the wire as
      // `\ud800`, which strict JSON parsers refuse.
      else issues.push({ id: id.toWellFormed(), reason: result === "not-found" ? "not found" : "pending or being delivered" });
    }
    return { status: 200, body: { replayed, issues } };
  });
}

/** An endpoint filter of the admin API: a key the tenant's config has (404 otherwise), or none. */
function knownEndpoint(tenant: CompiledTenant, endpoint: string | undefined): string | undefined {
  if (endpoint !== undefined && !tenant.webhooks.some((w) => w.key === endpoint)) fail("NOT_FOUND", `Webhook endpoint not found: ${quoted(endpoint)}`);
  return endpoint;
}
