import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Queue, Worker } from "bullmq";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, expect } from "vitest";
import { duplicateClient, queueConnection } from "../../src/store/redis-client.js";
import { portOutsideEphemeralRange } from "./ports.js";
import { callService, runService, stopRunning, waitFor, WORKER, type ServiceProcess } from "./service-process.js";
import { lessonsTenantYaml, lessonsXpTenantYaml } from "./tenant-yaml.js";

/**
 * The password-file tests' set-up (redis-password-file, sentinel-password-file): a directory of
 * the file's own with a lessons + XP tenant file (tenant `tenantId`), the built processes started
 * on it and stopped after the file's tests, and password files written and rotated as an
 * operator's tools do. Registers the file's beforeAll and afterAll.
 */
/** How many of `proc`'s log lines have a message starting with `start`. */
export const linesStarting = (proc: ServiceProcess, start: string): number => proc.output().split("\n").filter((line) => line.includes(`"msg":"${start}`)).length;

/** A lesson for `user`, then that user's XP read back: both must be served. */
export async function served(port: number, user: string): Promise<boolean> {
  const event = await callService(port, "POST", "/v1/metrics/lessons/event", { user: { id: user }, value: 1 });
  if (event.status !== 201) return false;
  const read = await callService(port, "GET", `/v1/users/${user}/points/xp`);
  return read.status === 200 && read.body.total === 10;
}

/**
 * `redis`'s copy (duplicateClient) and a BullMQ queue and worker on its connection options, the
 * connections a rotation must reach besides the client itself, for `body`; `doubled(n)` adds a
 * job and waits for the worker's answer. After `body`, `release` (take any password, so that
 * connections still refused come back and close: BullMQ's close waits for them), then all closed.
 */
export async function withCopyAndQueue(
  redis: Redis,
  name: string,
  body: (parts: { copy: Redis; doubled(n: number): Promise<unknown> }) => Promise<void>,
  release: () => Promise<void>,
): Promise<void> {
  const copy = duplicateClient(redis);
  const queue = new Queue(name, { connection: queueConnection(redis) });
  const worker = new Worker(name, async (job) => (job.data as { n: number }).n * 2, { connection: queueConnection(redis) });
  queue.on("error", () => undefined);
  worker.on("error", () => undefined);
  const completed = new Map<string, unknown>();
  worker.on("completed", (job, result) => completed.set(job.id!, result));
  const doubled = async (n: number): Promise<unknown> => {
    const job = await queue.add("double", { n });
    await waitFor(() => completed.has(job.id!), `the job of ${n} to be done by the BullMQ worker`);
    return completed.get(job.id!);
  };
  try {
    await body({ copy, doubled });
  } finally {
    await release();
    await worker.close(true);
    await queue.close();
    copy.disconnect();
    redis.disconnect();
  }
}

/** Each process stopped (SIGTERM) exits 0, and no output of its holds any of `secrets`. */
export async function stopsCleanly(processes: readonly ServiceProcess[], secrets: readonly string[]): Promise<void> {
  for (const proc of processes) {
    proc.child.kill("SIGTERM");
    expect(await proc.exited).toBe(0);
    for (const secret of secrets) expect(proc.output()).not.toContain(secret);
  }
}

/** What a start refused a file's password says and holds (a rotation half done). */
export interface RefusedStart {
  env: Record<string, string>;
  /** The refusal's line, before "; waiting ..." or " (still refused ...)". */
  refusal: string;
  /** The start of the refusal's message, said once however often the refusal comes. */
  prefix: string;
  variable: string;
  /** Never to appear in any output. */
  secrets: string[];
}

export function passwordFileFixture(tenantId: string, fileName: string) {
  let dir = "";
  let config = "";
  const running: ServiceProcess[] = [];
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), `laurel-${tenantId}-`));
    config = join(dir, "tenant.yaml");
    writeFileSync(config, lessonsXpTenantYaml(tenantId));
  });
  afterAll(async () => {
    await stopRunning(running);
    rmSync(dir, { recursive: true, force: true });
  });
  return {
    /** The directory (set in beforeAll). */
    dir: () => dir,
    /** The built service (or `entry`) on the tenant file, stopped after the file's tests. */
    start(env: Record<string, string>, entry?: string): ServiceProcess {
      const proc = runService({ LAUREL_CONFIG: config, ...env }, entry);
      running.push(proc);
      return proc;
    },
    /** A tenant file (tenant `hookTenantId`) whose webhook endpoint at `url` takes points.changed: deliveries go through BullMQ's connections. */
    hookedConfig(hookTenantId: string, url: string): string {
      const path = join(dir, `${hookTenantId}.yaml`);
      writeFileSync(path, lessonsTenantYaml(hookTenantId, { url, events: ["points.changed"] }));
      return path;
    },
    /** A password file in a directory of its own (as a secret volume), holding `password` and a newline (as `echo` writes it). */
    passwordFile(name: string, password: string): string {
      mkdirSync(join(dir, name));
      const path = join(dir, name, fileName);
      writeFileSync(path, `${password}\n`);
      return path;
    },
    /** Replaces the file as a rotation tool does: written beside it, then renamed over it (never seen half written). */
    rotate(path: string, password: string): void {
      writeFileSync(`${path}.new`, `${password}\n`);
      renameSync(`${path}.new`, path);
    },
    /** Files the start must refuse: an empty one, one of two lines (the second holding `secret`), and a path to none. */
    unusableFiles(secret: string): { empty: string; lines: string; missing: string } {
      const empty = join(dir, "empty");
      writeFileSync(empty, "\n");
      const lines = join(dir, "lines");
      writeFileSync(lines, `HOST=redis\nPASSWORD=${secret}\n`);
      return { empty, lines, missing: join(dir, "missing") };
    },
    /** Starts the service and dist/worker.js with each env: each stops at its environment check, saying `says`, never `secret`. */
    async refusedAtStart(starts: { env: Record<string, string>; says: string }[], secret: string): Promise<void> {
      const runs = starts.flatMap(({ env, says }) => [this.start({ ...env, PORT: "0" }), this.start(env, WORKER)].map((proc) => ({ proc, says })));
      for (const { proc, says } of runs) {
        expect(await proc.exited).toBe(1);
        expect(proc.output()).toContain("invalid environment: ");
        expect(proc.output()).toContain(says);
        expect(proc.output()).not.toContain(secret);
      }
    },
    /**
     * Starts the service and dist/worker.js refused (LAUREL_REDIS_WAIT an hour); each says it
     * waits for the file, once; after `writeFile` both start and serve, and stop cleanly.
     */
    async startsOnceWritten(start: RefusedStart, writeFile: () => void): Promise<void> {
      const port = await portOutsideEphemeralRange();
      const env = { ...start.env, LAUREL_REDIS_WAIT: "3600" };
      const service = this.start({ ...env, PORT: String(port) });
      const worker = this.start(env, WORKER);
      const waiting = `${start.refusal}; waiting for ${start.variable} to hold the password it takes`;
      for (const proc of [service, worker]) await waitFor(() => proc.output().includes(waiting), "the start to wait for the file", proc.exited, proc.output);
      writeFile();
      await waitFor(() => service.output().includes("laurel listening"), "the service to listen", service.exited, service.output);
      await waitFor(() => worker.output().includes("laurel stream worker running"), "the worker to run", worker.exited, worker.output);
      expect(await served(port, "started")).toBe(true);
      // Said once, however many times the password was refused meanwhile.
      for (const proc of [service, worker]) expect(linesStarting(proc, start.prefix)).toBe(1);
      await stopsCleanly([service, worker], start.secrets);
    },
    /**
     * Starts the service and dist/worker.js refused, with a bound of 10 s: each exits 1 with the
     * refusal and the bound. The bound is what the start waits out, not a race: the refusal comes
     * within milliseconds, and every attempt after it is refused too.
     */
    async givesUpAtTheBound(start: RefusedStart): Promise<void> {
      const env = { ...start.env, LAUREL_REDIS_WAIT: "10" };
      const line = `${start.refusal} (still refused after 10 s, LAUREL_REDIS_WAIT, the file read again at each refusal)`;
      for (const proc of [this.start({ ...env, PORT: "0" }), this.start(env, WORKER)]) {
        expect(await proc.exited).toBe(1);
        expect(proc.output()).toContain(line);
        expect(proc.output()).not.toContain("laurel listening");
        for (const secret of start.secrets) expect(proc.output()).not.toContain(secret);
      }
    },
  };
}
