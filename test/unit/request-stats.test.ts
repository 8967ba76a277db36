import { describe, expect, it } from "vitest";
import { renderMetrics } from "../../src/api/prometheus.js";
import { ABORTED, RequestStats } from "../../src/http/request-stats.js";
import { PROCESS_NAME } from "../../src/process-name.js";

// The histogram's placement and its cumulative rendering, which the integration test
// (request-metrics.test.ts) cannot pin: real latencies land wherever the machine puts them.
describe("request stats", () => {
  it("files each latency under the first bound it is within, and renders the buckets cumulative, in seconds", () => {
    const stats = new RequestStats();
    const route = stats.route("POST", "/v1/metrics/:key/event");
    stats.route("GET", "/never/reached");
    for (const [status, ms] of [[201, 0.1], [201, 0.25], [201, 0.26], [202, 3], [400, 3000], [ABORTED, 40]] as const) route.record(status, ms);

    const text = renderMetrics([], [], { slots: 0, lookups: 0, misses: 0 }, stats);
    const labels = `process="${PROCESS_NAME}",method="POST",route="/v1/metrics/:key/event"`;
    const lines = text.split("\n").filter((l) => l.includes("laurel_http_") && !l.startsWith("#"));
    expect(lines).toEqual([
      `laurel_http_requests_in_flight{process="${PROCESS_NAME}"} 0`,
      `laurel_http_requests_total{${labels},status="201"} 3`,
      `laurel_http_requests_total{${labels},status="202"} 1`,
      `laurel_http_requests_total{${labels},status="400"} 1`,
      `laurel_http_requests_total{${labels},status="aborted"} 1`,
      // 0.1 and 0.25 (a bound holds its own value) under 0.25 ms; 0.26 under 0.5; 3 under 5; 40 under 50; 3000 above every bound.
      `laurel_http_request_duration_seconds_bucket{${labels},le="0.00025"} 2`,
      `laurel_http_request_duration_seconds_bucket{${labels},le="0.0005"} 3`,
      `laurel_http_request_duration_seconds_bucket{${labels},le="0.001"} 3`,
      `laurel_http_request_duration_seconds_bucket{${labels},le="0.0025"} 3`,
      `laurel_http_request_duration_seconds_bucket{${labels},le="0.005"} 4`,
      `laurel_http_request_duration_seconds_bucket{${labels},le="0.01"} 4`,
      `laurel_http_request_duration_seconds_bucket{${labels},le="0.025"} 4`,
      `laurel_http_request_duration_seconds_bucket{${labels},le="0.05"} 5`,
      `laurel_http_request_duration_seconds_bucket{${labels},le="0.1"} 5`,
      `laurel_http_request_duration_seconds_bucket{${labels},le="0.25"} 5`,
      `laurel_http_request_duration_seconds_bucket{${labels},le="1"} 5`,
      `laurel_http_request_duration_seconds_bucket{${labels},le="2.5"} 5`,
      `laurel_http_request_duration_seconds_bucket{${labels},le="+Inf"} 6`,
      `laurel_http_request_duration_seconds_sum{${labels}} ${(0.1 + 0.25 + 0.26 + 3 + 3000 + 40) / 1000}`,
      `laurel_http_request_duration_seconds_count{${labels}} 6`,
    ]);
  });
});

// The lag gauges and the delivery counts, from values given here: the integration tests
// (stream-worker, webhooks) see what a live stream happens to hold, mostly zeros.
describe("lag and delivery gauges", () => {
  it("render each gauge from its own field (the age in seconds), leave out a value Redis could not tell, and every delivery status", () => {
    const lags = [
      { tenantId: "t1", shard: 0, group: "buckets", length: 7, pending: 2, undelivered: 3, oldestAgeMs: 1500 },
      { tenantId: "t1", shard: 1, group: "webhooks", length: 4, pending: 1, undelivered: null, oldestAgeMs: 0 },
    ];
    const deliveries = [{ tenantId: "t1", counts: { pending: 1, delivering: 2, retrying: 3, delivered: 4, dead: 5 } }];
    const text = renderMetrics(lags, deliveries, { slots: 8, lookups: 6, misses: 1 }, new RequestStats());
    const own = `{process="${PROCESS_NAME}"}`;
    const lines = text.split("\n").filter((l) => /^laurel_(stream|webhook|award)/.test(l));
    expect(lines).toEqual([
      `laurel_stream_entries{tenant="t1",shard="0",group="buckets"} 7`,
      `laurel_stream_entries{tenant="t1",shard="1",group="webhooks"} 4`,
      `laurel_stream_pending_entries{tenant="t1",shard="0",group="buckets"} 2`,
      `laurel_stream_pending_entries{tenant="t1",shard="1",group="webhooks"} 1`,
      // Shard 1's undelivered count is unknown (null): no line, rather than a made-up 0.
      `laurel_stream_undelivered_entries{tenant="t1",shard="0",group="buckets"} 3`,
      `laurel_stream_oldest_unprocessed_age_seconds{tenant="t1",shard="0",group="buckets"} 1.5`,
      `laurel_stream_oldest_unprocessed_age_seconds{tenant="t1",shard="1",group="webhooks"} 0`,
      `laurel_webhook_deliveries{tenant="t1",status="pending"} 1`,
      `laurel_webhook_deliveries{tenant="t1",status="delivering"} 2`,
      `laurel_webhook_deliveries{tenant="t1",status="retrying"} 3`,
      `laurel_webhook_deliveries{tenant="t1",status="delivered"} 4`,
      `laurel_webhook_deliveries{tenant="t1",status="dead"} 5`,
      `laurel_award_id_table_slots${own} 8`,
      `laurel_award_id_lookups_total${own} 6`,
      `laurel_award_id_misses_total${own} 1`,
    ]);
    // Each gauge is typed once; a process without delivery queues has no deliveries family.
    expect(text.match(/^# TYPE laurel_stream_entries gauge$/gm)).toHaveLength(1);
    expect(renderMetrics(lags, [], { slots: 8, lookups: 6, misses: 1 }, new RequestStats())).not.toContain("laurel_webhook_deliveries");
    expect(renderMetrics(lags, [], { slots: 8, lookups: 6, misses: 1 }, new RequestStats())).toMatch(/^laurel_redis_up\{process="[^"]*"\} 1$/m);
    // Redis did not answer the scrape: no series read from it, and up 0; the process's own stay.
    const without = renderMetrics(null, [], { slots: 8, lookups: 6, misses: 1 }, new RequestStats());
    expect(without).toMatch(/^laurel_redis_up\{process="[^"]*"\} 0$/m);
    expect(without).not.toMatch(/^laurel_stream_entries\{/m);
    expect(without).toMatch(/^laurel_award_id_table_slots\{process="[^"]*"\} 8$/m);
    // Redis's memory: given with the series read from Redis, left out with them.
    const memory = { used: 1_234_567, max: 2_147_483_648 };
    const withMemory = renderMetrics(lags, [], { slots: 8, lookups: 6, misses: 1 }, new RequestStats(), memory);
    expect(withMemory).toMatch(/^laurel_redis_used_memory_bytes 1234567$/m);
    expect(withMemory).toMatch(/^laurel_redis_maxmemory_bytes 2147483648$/m);
    expect(renderMetrics(null, [], { slots: 8, lookups: 6, misses: 1 }, new RequestStats(), memory)).not.toContain("laurel_redis_used_memory_bytes");
  });
});
