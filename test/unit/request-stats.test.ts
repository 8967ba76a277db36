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
