import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { freePort, setprivDeathSignal, startEmbeddedRedis, type EmbeddedRedis } from "../../src/embedded-redis.js";
import type { TlsFiles } from "./tls-redis.js";
import { waitFor } from "./wait-for.js";

/**
 * A throwaway redis-server on a free port, without persistence unless asked for.
 * `clusterNode`: a one-node Redis Cluster holding every slot (test/integration/cluster-node.test.ts).
 * Such a server applies Cluster's key checks, which a standalone one does not: every command's
 * keys must hash to one slot (CROSSSLOT), and so must every key a script touches ("Script
 * attempted to access keys that do not hash to the same slot"), declared or not.
 */
export async function startTestRedis(opts: { appendOnly?: boolean; dir?: string; clusterNode?: boolean } = {}): Promise<EmbeddedRedis & { dir: string }> {
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), "laurel-redis-"));
  const serverArgs = opts.clusterNode ? ["--cluster-enabled", "yes", "--cluster-config-file", join(dir, "nodes.conf")] : [];
  const server = await startEmbeddedRedis({ dir, appendOnly: opts.appendOnly ?? false, serverArgs });
  if (opts.clusterNode) await takeEverySlot(server.url);
  return {
    ...server,
    dir,
    async stop() {
      await server.stop();
      if (!opts.dir) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Gives a cluster-mode node all 16 384 slots and waits until it says the cluster is ok (it serves no key before). */
async function takeEverySlot(url: string): Promise<void> {
  const redis = new Redis(url);
  try {
    await redis.call("CLUSTER", "ADDSLOTSRANGE", "0", "16383");
    // The node marks the cluster ok on its own cron (every 100 ms), not at once: a state waited on.
    await waitFor(async () => String(await redis.call("CLUSTER", "INFO")).includes("cluster_state:ok"), "the one-node cluster to say it is ok");
  } finally {
    redis.disconnect();
  }
}

/**
 * A Redis Sentinel on a free port watching the primary on `primaryPort` as the group `name`, with
 * a quorum of one (a single sentinel may decide a failover: test/integration/redis-sentinel.test.ts).
 * Sentinel needs a config file it can rewrite, kept in a temporary directory; it takes the death
 * signal as the test servers do (src/embedded-redis.ts).
 * `tls` (the certificate and key of a TLS server, and its CA: tls-redis.ts): the sentinel speaks
 * TLS only (no plain port), and TLS to the servers it watches (`tls-replication`), presenting
 * that certificate as its client certificate; `authClients`: it asks its own clients for one
 * signed by the CA (`tls-auth-clients yes`).
 */
export async function startTestSentinel(primaryPort: number, replicaPorts: number[] = [], name = "mymaster", opts: { tls?: TlsFiles & { authClients?: boolean } } = {}): Promise<{ port: number; stop(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), "laurel-sentinel-"));
  const port = await freePort();
  const config = join(dir, "sentinel.conf");
  writeFileSync(config, [
    ...(opts.tls
      ? ["port 0", `tls-port ${port}`, `tls-cert-file ${opts.tls.cert}`, `tls-key-file ${opts.tls.key}`, `tls-ca-cert-file ${opts.tls.ca}`, `tls-auth-clients ${opts.tls.authClients ? "yes" : "no"}`, "tls-replication yes"]
      : [`port ${port}`]),
    "bind 127.0.0.1", `dir ${dir}`, `sentinel monitor ${name} 127.0.0.1 ${primaryPort} 1`, `sentinel down-after-milliseconds ${name} 60000`, `sentinel failover-timeout ${name} 10000`,
    // The tests fail over with SENTINEL FAILOVER; a primary held up a second (a loaded box) must
    // not be taken for down and failed over unasked (then SENTINEL FAILOVER answers INPROG).
    // Replicas named up front: learnt from the primary's INFO, they took up to 10 s to be known.
    ...replicaPorts.map((replica) => `sentinel known-replica ${name} 127.0.0.1 ${replica}`),
    "",
  ].join("\n"));
  const args = [config, "--sentinel"];
  const child = setprivDeathSignal() ? spawn("setpriv", ["--pdeathsig", "TERM", "--", "redis-server", ...args], { stdio: "ignore" }) : spawn("redis-server", args, { stdio: "ignore" });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  // Ready once it answers PING (a sentinel has no `loading` field for waitForRedis to read).
  const probe = new Redis(port, "127.0.0.1", { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, ...(opts.tls ? { tls: { ca: readFileSync(opts.tls.ca), cert: readFileSync(opts.tls.cert), key: readFileSync(opts.tls.key) } } : {}) });
  probe.on("error", () => undefined);
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`redis-server --sentinel exited with code ${child.exitCode}`);
      const answered = await probe.connect().then(() => probe.ping()).then(() => true, () => false);
      if (answered) break;
      probe.disconnect();
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } finally {
    probe.disconnect();
  }
  return {
    port,
    async stop() {
      if (child.exitCode === null) {
        child.kill("SIGTERM");
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
