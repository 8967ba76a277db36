import type { Redis } from "ioredis";
import type { CompiledTenant } from "../config/compiled.js";
import { awardIdTableStats, type AwardIdTableStats } from "../domain/award-ids.js";
import type { ApiReply } from "../http/router.js";
import { streamLag, type StreamLag } from "../jobs/stream-lag.js";
import { BUCKET_GROUP } from "../jobs/stream-worker.js";
import { DELIVERY_STATUSES, type DeliveryStatus } from "../jobs/webhooks/deliveries.js";
import type { Webhooks } from "../jobs/webhooks/index.js";
import { WEBHOOK_GROUP } from "../jobs/webhooks/keys.js";
import { PROCESS_NAME } from "../process-name.js";
import { LATENCY_BOUNDS_MS, type RequestStats } from "../http/request-stats.js";
import { REDIS_REFUSALS } from "../store/redis-refusals.js";
import { answeredWithin } from "../deadline.js";
import { LogThrottle } from "../log-throttle.js";
import { renderProcessMetrics, watchEventLoopDelay } from "./process-metrics.js";
import { redisTlsFileEnds } from "../store/redis-tls.js";
import type { Logger } from "pino";

/** This process in the per-process series, as a label value (no quote, backslash or newline). */
const PROCESS_LABEL = PROCESS_NAME.replace(/["\\\n]/g, "_");

/**
 * GET /metrics, in the Prometheus text format (version 0.0.4). No key, like /healthz: it reveals
 * tenant ids and counts, nothing about users; expose it to the scraper only.
 *
 * - The lag of each consumer group on its stream of each shard, labelled by group: `buckets` (the
 *   stream worker on the shard streams, every tenant) and `webhooks` (outbound events, on the hook
 *   streams of tenants with endpoints). Computed from Redis, so any Laurel process can serve it,
 *   whichever process runs the consumers.
 * - `laurel_webhook_deliveries` per tenant and status (pending, delivering, retrying, delivered,
 *   dead), from the delivery queues this process holds (none with webhooks off here).
 * - This process's award id table (src/domain/award-ids.ts): its slots (LAUREL_AWARD_IDS), and
 *   the looks and misses of its metering reads, so an operator can see whether it is large
 *   enough (a miss computes the id's UUID again, ~1.5 µs).
 * - This process's answers by route: counts by status, and the latency histogram
 *   (src/http/request-stats.ts); and the commands Redis refused it, by cause.
 * - Redis's memory and its maxmemory (INFO memory), read with the lag.
 * - When the Redis TLS files' certificates end (store/redis-tls.ts), to alert before they do.
 * - This process's CPU, memory, descriptors and event-loop delay (process-metrics.ts).
 */
type GroupLag = StreamLag & { group: string };

const GAUGES: [name: string, help: string, value: (l: GroupLag) => number | null][] = [
  ["laurel_stream_entries", "Entries in the group's stream, the shard stream (buckets) or the hook stream (webhooks), trimmed once acknowledged.", (l) => l.length],
  ["laurel_stream_pending_entries", "Entries delivered to a consumer of the group and not yet acknowledged.", (l) => l.pending],
  ["laurel_stream_undelivered_entries", "Entries not yet delivered to any consumer of the group.", (l) => l.undelivered],
  ["laurel_stream_oldest_unprocessed_age_seconds", "Age of the oldest entry the group has not processed yet (0 when none).", (l) => l.oldestAgeMs / 1000],
];

export interface TenantDeliveries {
  tenantId: string;
  counts: Record<DeliveryStatus, number>;
}

/** Redis's memory as INFO memory gives it: what it uses, and its maxmemory (0: no limit). */
export interface RedisMemory {
  used: number;
  max: number;
}

/**
 * The figures of INFO memory a scrape gives: when `used` reaches `max`, Redis refuses every write
 * (503, nothing recorded), so this is the alert an operator needs before the first refusal.
 */
async function redisMemory(redis: Redis): Promise<RedisMemory> {
  const info = await redis.info("memory");
  const field = (name: string): number => Number(new RegExp(`^${name}:(\\d+)`, "m").exec(info)?.[1] ?? NaN);
  return { used: field("used_memory"), max: field("maxmemory") };
}

/**
 * `lags` null: Redis did not answer this scrape's reads (laurel_redis_up 0; no stream, delivery
 * or Redis memory series).
 */
export function renderMetrics(
  lags: readonly GroupLag[] | null,
  deliveries: readonly TenantDeliveries[],
  awardIds: AwardIdTableStats,
  requests: RequestStats,
  memory: RedisMemory | null = null,
): string {
  const lines: string[] = [
    "# HELP laurel_redis_up 1 when Redis answered this scrape's reads within LAUREL_HEALTH_TIMEOUT (1 s by default; the stream and delivery series are given), 0 when it did not or the connection is down (they are left out; this process's own series are given either way).",
    "# TYPE laurel_redis_up gauge",
    `laurel_redis_up{process="${PROCESS_LABEL}"} ${lags === null ? 0 : 1}`,
  ];
  if (lags !== null && memory !== null) {
    lines.push(
      "# HELP laurel_redis_used_memory_bytes Memory Redis uses (INFO memory used_memory): at laurel_redis_maxmemory_bytes it refuses every write.",
      "# TYPE laurel_redis_used_memory_bytes gauge",
      `laurel_redis_used_memory_bytes ${memory.used}`,
      "# HELP laurel_redis_maxmemory_bytes Redis's maxmemory (0: no limit set; the machine's memory is the limit then).",
      "# TYPE laurel_redis_maxmemory_bytes gauge",
      `laurel_redis_maxmemory_bytes ${memory.max}`,
    );
  }
  for (const [name, help, value] of GAUGES) {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`);
    for (const l of lags ?? []) {
      const v = value(l);
      if (v !== null) lines.push(`${name}{tenant="${l.tenantId}",shard="${l.shard}",group="${l.group}"} ${v}`);
    }
  }
  if (deliveries.length > 0) {
    const name = "laurel_webhook_deliveries";
    lines.push(`# HELP ${name} Outbound event deliveries by status (dead: every attempt failed; replay with the admin API).`, `# TYPE ${name} gauge`);
    for (const d of deliveries) for (const status of DELIVERY_STATUSES) lines.push(`${name}{tenant="${d.tenantId}",status="${status}"} ${d.counts[status]}`);
  }
  // The answering process's own figures, labelled with it: processes sharing a port
  // (LAUREL_REUSE_PORT) answer scrapes in turn, and one series fed by several processes' counters
  // went up and down, which Prometheus reads as resets.
  const own = `{process="${PROCESS_LABEL}"}`;
  lines.push(
    "# HELP laurel_award_id_table_slots Award ids this process remembers for the metering read (LAUREL_AWARD_IDS).",
    "# TYPE laurel_award_id_table_slots gauge",
    `laurel_award_id_table_slots${own} ${awardIds.slots}`,
    "# HELP laurel_award_id_lookups_total Award ids the metering reads of this process asked the table for.",
    "# TYPE laurel_award_id_lookups_total counter",
    `laurel_award_id_lookups_total${own} ${awardIds.lookups}`,
    "# HELP laurel_award_id_misses_total Lookups the table could not answer, so the id was computed (a UUIDv5).",
    "# TYPE laurel_award_id_misses_total counter",
    `laurel_award_id_misses_total${own} ${awardIds.misses}`,
  );
  renderRequests(lines, requests);
  const tlsEnds = redisTlsFileEnds();
  if (tlsEnds.length > 0) {
    const name = "laurel_redis_tls_not_after_seconds";
    lines.push(
      `# HELP ${name} When the certificate of a LAUREL_REDIS_TLS_* file this process uses for new connections ends (a CA file: its first to end), in seconds since the epoch; a renewal the process did not take shows as the old end.`,
      `# TYPE ${name} gauge`,
    );
    for (const end of tlsEnds) lines.push(`${name}{process="${PROCESS_LABEL}",file="${end.file}"} ${end.notAfterSeconds}`);
  }
  renderProcessMetrics(lines, `process="${PROCESS_LABEL}"`);
  return `${lines.join("\n")}\n`;
}

/**
 * This process's answers (src/http/request-stats.ts): a counter by route and status, and a
 * latency histogram by route. Routes no request reached yet are left out, as Prometheus clients
 * leave out a labelled series before its first observation.
 */
function renderRequests(lines: string[], requests: RequestStats): void {
  // Every cause from the start (0 until one happens), so that an alert's rate() has a series to read.
  lines.push(
    "# HELP laurel_redis_refusals_total Commands Redis refused before running them (nothing recorded, answered 503), by cause: out of memory, a read-only replica, its disk, too few replicas, loading, busy, credentials refused, authentication required.",
    "# TYPE laurel_redis_refusals_total counter",
  );
  for (const { cause } of REDIS_REFUSALS) lines.push(`laurel_redis_refusals_total{process="${PROCESS_LABEL}",cause="${cause}"} ${requests.refusals.get(cause) ?? 0}`);
  lines.push(
    "# HELP laurel_read_timeouts_total Reads (GET) answered 503 because Redis had not answered them within LAUREL_READ_TIMEOUT (a stalled Redis).",
    "# TYPE laurel_read_timeouts_total counter",
    `laurel_read_timeouts_total{process="${PROCESS_LABEL}"} ${requests.readTimeouts}`,
    "# HELP laurel_http_requests_in_flight Requests this process has taken and not yet answered (this scrape included): writes waiting for a stalled Redis pile up here.",
    "# TYPE laurel_http_requests_in_flight gauge",
    `laurel_http_requests_in_flight{process="${PROCESS_LABEL}"} ${requests.inFlight}`,
  );
  const used = requests.routes.filter((r) => r.count > 0);
  lines.push(
    "# HELP laurel_http_requests_total Requests this process answered, by route and status (aborted: the client closed the connection first).",
    "# TYPE laurel_http_requests_total counter",
  );
  for (const r of used) {
    for (const [status, n] of r.statuses) lines.push(`laurel_http_requests_total{process="${PROCESS_LABEL}",method="${r.method}",route="${r.route}",status="${status}"} ${n}`);
  }
  lines.push(
    "# HELP laurel_http_request_duration_seconds Time from a request's arrival in the router to its answer, Redis included, by route.",
    "# TYPE laurel_http_request_duration_seconds histogram",
  );
  for (const r of used) {
    const labels = `process="${PROCESS_LABEL}",method="${r.method}",route="${r.route}"`;
    let cumulative = 0;
    LATENCY_BOUNDS_MS.forEach((bound, i) => {
      cumulative += r.buckets[i]!;
      lines.push(`laurel_http_request_duration_seconds_bucket{${labels},le="${bound / 1000}"} ${cumulative}`);
    });
    lines.push(
      `laurel_http_request_duration_seconds_bucket{${labels},le="+Inf"} ${r.count}`,
      `laurel_http_request_duration_seconds_sum{${labels}} ${r.sumMs / 1000}`,
      `laurel_http_request_duration_seconds_count{${labels}} ${r.count}`,
    );
  }
}

/**
 * `redisTimeoutMs` (LAUREL_HEALTH_TIMEOUT, as /healthz's PING): how long a scrape waits for the
 * series it reads from Redis. Past it, or while the connection is down, the scrape is answered
 * without them (laurel_redis_up 0): the process's own series (its 5xx, Redis's refusals, the reads
 * it answered 503) are what an operator needs during an outage, and a scrape that failed or hung
 * with Redis showed none of them until Redis was back.
 */
export function prometheusHandler(redis: Redis, tenants: readonly CompiledTenant[], webhooks: Webhooks | null, requests: RequestStats, logger: Logger, redisTimeoutMs: number) {
  const hooked = tenants.filter((t) => t.webhooks.length > 0);
  watchEventLoopDelay();
  // A failing read repeats at every scrape while Redis is out: said once per 30 s.
  const failures = new LogThrottle();
  const readFromRedis = () =>
    Promise.all([
      streamLag(redis, tenants, BUCKET_GROUP),
      streamLag(redis, hooked, WEBHOOK_GROUP, "hooks"),
      Promise.all(
        hooked.flatMap((t) => {
          const queue = webhooks?.deliveries(t.id);
          return queue ? [queue.counts().then((counts) => ({ tenantId: t.id, counts }))] : [];
        }),
      ),
      redisMemory(redis),
    ]);
  return async (): Promise<ApiReply> => {
    const fromRedis =
      redis.status === "ready"
        ? await answeredWithin(readFromRedis(), redisTimeoutMs).catch((err: unknown) => {
            failures.run((unlogged) => logger.warn({ err: err instanceof Error ? err.message : String(err), unlogged }, "GET /metrics: the series read from Redis were left out"));
            return null;
          })
        : null;
    const [buckets, outbound, deliveries, memory] = fromRedis ?? [[], [], [], null];
    const lags = [...buckets.map((l) => ({ ...l, group: BUCKET_GROUP })), ...outbound.map((l) => ({ ...l, group: WEBHOOK_GROUP }))];
    return {
      status: 200,
      contentType: "text/plain; version=0.0.4; charset=utf-8",
      body: renderMetrics(fromRedis === null ? null : lags, deliveries, awardIdTableStats(), requests, memory),
    };
  };
}
