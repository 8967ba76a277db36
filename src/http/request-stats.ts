/**
 * Requests this process answered, per route: counts by status and a latency histogram, for
 * GET /metrics (src/api/prometheus.ts). The latency is the handler's: from the request's arrival
 * in the router to its answer being written, Redis's round trip included, the network and
 * uWS's parsing not. Recording is two clock reads, a Map update and a short scan: ~0.2 µs of an
 * event call's ~40 (README, GET /metrics).
 */

/** Upper bounds of the histogram's buckets, in milliseconds (Prometheus' `le`, in seconds, on the wire). */
export const LATENCY_BOUNDS_MS = [0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 1000, 2500] as const;

/** A request whose client closed its connection before the answer: counted under this status. */
export const ABORTED = "aborted";

export class RouteStats {
  /** Answers by status (a number, or ABORTED). */
  readonly statuses = new Map<number | typeof ABORTED, number>();
  /** Requests by the first bucket whose bound their latency is within; the last slot is above every bound. */
  readonly buckets: number[] = new Array<number>(LATENCY_BOUNDS_MS.length + 1).fill(0);
  sumMs = 0;
  count = 0;

  constructor(
    readonly method: string,
    readonly route: string,
  ) {}

  record(status: number | typeof ABORTED, latencyMs: number): void {
    this.statuses.set(status, (this.statuses.get(status) ?? 0) + 1);
    let i = 0;
    while (i < LATENCY_BOUNDS_MS.length && latencyMs > LATENCY_BOUNDS_MS[i]!) i++;
    this.buckets[i]!++;
    this.sumMs += latencyMs;
    this.count++;
  }
}

/** Every route's stats, in the order the routes were registered; and Redis's refusals. */
export class RequestStats {
  readonly routes: RouteStats[] = [];
  /** Commands Redis refused before running them, by cause (src/store/redis-refusals.ts): a request's, or a batch event's. */
  readonly refusals = new Map<string, number>();
  /** Reads answered 503 because Redis had not answered them within LAUREL_READ_TIMEOUT (read-deadline.ts). */
  readTimeouts = 0;
  /** Requests taken and not yet answered or aborted (the router's drain waits for them; GET /metrics shows them). */
  inFlight = 0;

  refused(cause: string): void {
    this.refusals.set(cause, (this.refusals.get(cause) ?? 0) + 1);
  }

  route(method: string, route: string): RouteStats {
    const stats = new RouteStats(method, route);
    this.routes.push(stats);
    return stats;
  }
}
