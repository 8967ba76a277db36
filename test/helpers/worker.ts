import { pino } from "pino";
import { StreamWorker, type StreamWorkerOptions } from "../../src/jobs/stream-worker.js";
import type { TestApp } from "./app.js";

/** A stream worker over the test app's tenants; tests call drain(), never start() (no waiting). */
export function bucketWorker(t: TestApp, opts: Partial<StreamWorkerOptions> = {}): StreamWorker {
  return new StreamWorker({ redis: t.redis, tenants: t.tenants, logger: pino({ level: "silent" }), ...opts });
}
