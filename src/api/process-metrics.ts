import { readdirSync, readFileSync } from "node:fs";
import { monitorEventLoopDelay, type IntervalHistogram, type RecordableHistogram } from "node:perf_hooks";

/**
 * The answering process's CPU, memory, file descriptors and event-loop delay, for GET /metrics,
 * under the names Prometheus' client libraries give them (process_* as every client does,
 * nodejs_* as prom-client does), so that dashboards and alerts written for those work unchanged.
 * They carry the `process` label as Laurel's per-process series do (processes sharing a port
 * answer scrapes in turn).
 *
 * The event-loop delay is what a request waits before the service even reads it: a full
 * collection, a long synchronous piece of work or a starved CPU shows here first. Measured by
 * one monitor per process (a libuv timer every 10 ms, unref'd: it keeps no process alive),
 * begun with the first /metrics route, and read as the delays since the process's previous
 * scrape (the histogram is reset after each), so a stall shows in the next scrape and then goes.
 */

/** When this process started, in seconds since the epoch (as prom-client computes it). */
const START_SECONDS = Date.now() / 1000 - process.uptime();
const VERSION = /^v(\d+)\.(\d+)\.(\d+)/.exec(process.version);

let eventLoopDelay: IntervalHistogram | null = null;

/** Begins measuring the event loop's delay for this process (once; later calls do nothing). */
export function watchEventLoopDelay(): void {
  if (eventLoopDelay !== null) return;
  eventLoopDelay = monitorEventLoopDelay({ resolution: 10 });
  eventLoopDelay.enable();
}

/** Open descriptors and their soft limit, from /proc (Linux); null elsewhere or when /proc is not readable. */
function fileDescriptors(): { open: number; max: number | null } | null {
  try {
    const open = readdirSync("/proc/self/fd").length;
    const limit = /^Max open files\s+(\d+|unlimited)/m.exec(readFileSync("/proc/self/limits", "utf8"));
    return { open, max: limit && limit[1] !== "unlimited" ? Number(limit[1]) : null };
  } catch {
    return null;
  }
}

/**
 * Appends this process's series to a /metrics answer; `label` is its rendered label (process="...").
 * `delays`: the event loop's (the process's monitor, once watched; a test's own).
 */
export function renderProcessMetrics(lines: string[], label: string, delays: IntervalHistogram | RecordableHistogram | null = eventLoopDelay): void {
  const cpu = process.cpuUsage();
  const memory = process.memoryUsage();
  const series = (name: string, type: "counter" | "gauge", help: string, value: number): void => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, `${name}{${label}} ${value}`);
  };
  series("process_cpu_user_seconds_total", "counter", "CPU time this process spent in user mode, in seconds.", cpu.user / 1e6);
  series("process_cpu_system_seconds_total", "counter", "CPU time this process spent in the kernel, in seconds.", cpu.system / 1e6);
  series("process_cpu_seconds_total", "counter", "CPU time this process spent, user and kernel, in seconds.", (cpu.user + cpu.system) / 1e6);
  series("process_start_time_seconds", "gauge", "When this process started, in seconds since the Unix epoch.", START_SECONDS);
  series("process_resident_memory_bytes", "gauge", "This process's resident memory, in bytes.", memory.rss);
  const fds = fileDescriptors();
  if (fds !== null) {
    series("process_open_fds", "gauge", "File descriptors this process holds open (sockets included).", fds.open);
    if (fds.max !== null) series("process_max_fds", "gauge", "The most file descriptors this process may open (its soft limit).", fds.max);
  }
  series("nodejs_heap_size_total_bytes", "gauge", "V8's heap, as reserved, in bytes.", memory.heapTotal);
  series("nodejs_heap_size_used_bytes", "gauge", "V8's heap in use (live objects and garbage not yet collected), in bytes.", memory.heapUsed);
  series("nodejs_external_memory_bytes", "gauge", "Memory outside V8's heap held by its objects (buffers and the award id table among them), in bytes.", memory.external);
  if (delays !== null) {
    // Nanoseconds; NaN (no sample yet, in the first 10 ms) is said as 0.
    const seconds = (ns: number): number => (Number.isFinite(ns) ? ns / 1e9 : 0);
    const help = (what: string): string => `The event loop's delay since this process's previous scrape, ${what}, in seconds.`;
    series("nodejs_eventloop_lag_mean_seconds", "gauge", help("mean"), seconds(delays.mean));
    series("nodejs_eventloop_lag_p50_seconds", "gauge", help("median"), seconds(delays.percentile(50)));
    series("nodejs_eventloop_lag_p99_seconds", "gauge", help("99th percentile"), seconds(delays.percentile(99)));
    series("nodejs_eventloop_lag_max_seconds", "gauge", help("longest"), seconds(delays.max));
    delays.reset();
  }
  if (VERSION !== null) {
    lines.push(
      "# HELP nodejs_version_info The Node.js version this process runs.",
      "# TYPE nodejs_version_info gauge",
      `nodejs_version_info{${label},version="${process.version}",major="${VERSION[1]}",minor="${VERSION[2]}",patch="${VERSION[3]}"} 1`,
    );
  }
}
