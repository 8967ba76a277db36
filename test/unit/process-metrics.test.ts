import { createHistogram } from "node:perf_hooks";
import { describe, expect, it } from "vitest";
import { renderProcessMetrics } from "../../src/api/process-metrics.js";

/** The value of a series line rendered with the label `process="p"`. */
function valueOf(lines: string[], name: string): number | undefined {
  const line = lines.find((l) => l.startsWith(`${name}{process="p"} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1));
}

describe("the event loop's delays in /metrics", () => {
  it("are the delays recorded since the previous scrape, in seconds, and the next scrape starts afresh", () => {
    const delays = createHistogram();
    // Nanoseconds, as the monitor records them: 1, 2 and 3 ms, and one 400-ms stall.
    for (const ns of [1e6, 2e6, 3e6, 4e8]) delays.record(ns);
    const first: string[] = [];
    renderProcessMetrics(first, 'process="p"', delays);
    expect(valueOf(first, "nodejs_eventloop_lag_max_seconds")).toBeCloseTo(0.4, 2);
    expect(valueOf(first, "nodejs_eventloop_lag_p50_seconds")).toBeCloseTo(0.002, 4);
    expect(valueOf(first, "nodejs_eventloop_lag_mean_seconds")).toBeCloseTo((1e6 + 2e6 + 3e6 + 4e8) / 4 / 1e9, 3);
    expect(first).toContain("# TYPE nodejs_eventloop_lag_p99_seconds gauge");

    delays.record(5e6);
    const second: string[] = [];
    renderProcessMetrics(second, 'process="p"', delays);
    expect(valueOf(second, "nodejs_eventloop_lag_max_seconds")).toBeCloseTo(0.005, 4);
    expect(valueOf(second, "nodejs_eventloop_lag_p50_seconds")).toBeCloseTo(0.005, 4);
  });

  it("are 0, not NaN, before the monitor has a sample", () => {
    const lines: string[] = [];
    renderProcessMetrics(lines, 'process="p"', createHistogram());
    for (const name of ["mean", "p50", "p99", "max"]) expect(valueOf(lines, `nodejs_eventloop_lag_${name}_seconds`)).toBe(0);
  });

  it("are left out of a process that does not watch its event loop", () => {
    const lines: string[] = [];
    renderProcessMetrics(lines, 'process="p"', null);
    expect(lines.some((l) => l.includes("eventloop"))).toBe(false);
    expect(valueOf(lines, "process_resident_memory_bytes")).toBeGreaterThan(0);
  });
});
