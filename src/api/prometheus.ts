import type { Redis } from "ioredis";
import type { CompiledTenant } from "../config/compiled.js";
import type { ApiReply } from "../http/router.js";
import { streamLag, type StreamLag } from "../jobs/stream-lag.js";

/**
 * GET /metrics: the stream worker's lag per shard stream, in the Prometheus text format
 * (version 0.0.4). No key, like /healthz: it reveals tenant ids and counts, nothing about users;
 * expose it to the scraper only. Computed from Redis, so any Laurel process can serve it,
 * whichever process runs the worker.
 */
const GAUGES: [name: string, help: string, value: (l: StreamLag) => number | null][] = [
  ["laurel_stream_entries", "Entries in the shard stream (trimmed once the worker has acknowledged them).", (l) => l.length],
  ["laurel_stream_pending_entries", "Entries delivered to the stream worker and not yet acknowledged.", (l) => l.pending],
  ["laurel_stream_undelivered_entries", "Entries not yet delivered to the stream worker.", (l) => l.undelivered],
  ["laurel_stream_oldest_unprocessed_age_seconds", "Age of the oldest entry the worker has not processed yet (0 when none).", (l) => l.oldestAgeMs / 1000],
];

export function renderLag(lags: readonly StreamLag[]): string {
  const lines: string[] = [];
  for (const [name, help, value] of GAUGES) {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`);
    for (const l of lags) {
      const v = value(l);
      if (v !== null) lines.push(`${name}{tenant="${l.tenantId}",shard="${l.shard}"} ${v}`);
    }
  }
  return `${lines.join("\n")}\n`;
}

export function prometheusHandler(redis: Redis, tenants: readonly CompiledTenant[]) {
  return async (): Promise<ApiReply> => ({
    status: 200,
    contentType: "text/plain; version=0.0.4; charset=utf-8",
    body: renderLag(await streamLag(redis, tenants)),
  });
}
