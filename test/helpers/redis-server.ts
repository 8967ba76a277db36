import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { freePort, startEmbeddedRedis, type EmbeddedRedis } from "../../src/embedded-redis.js";
import { startRedisChild, type RedisChild } from "../../src/redis-child.js";
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
 * Sentinel needs a config file it can rewrite, kept in a temporary directory. Started as the
 * embedded server is (src/redis-child.ts): with the death signal, ready once it answers as itself,
 * and on another port when the one found free is taken before it binds it (`pickPort`: how a free
 * port is found, freePort unless a test gives one that first finds a taken port).
 * `tls` (the certificate and key of a TLS server, and its CA: tls-redis.ts): the sentinel speaks
 * TLS only (no plain port), and TLS to the servers it watches (`tls-replication`), presenting
 * that certificate as its client certificate; `authClients`: it asks its own clients for one
 * signed by the CA (`tls-auth-clients yes`).
 */
export async function startTestSentinel(
  primaryPort: number,
  replicaPorts: number[] = [],
  name = "mymaster",
  opts: { tls?: TlsFiles & { authClients?: boolean }; pickPort?: () => Promise<number> } = {},
): Promise<{ port: number; stop(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), "laurel-sentinel-"));
  const config = join(dir, "sentinel.conf");
  // Written again for each port tried.
  const args = (port: number): string[] => {
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
    return [config, "--sentinel"];
  };
  const probe = opts.tls ? { tls: { ca: readFileSync(opts.tls.ca), cert: readFileSync(opts.tls.cert), key: readFileSync(opts.tls.key) } } : {};
  let sentinel: RedisChild;
  try {
    sentinel = await startRedisChild({ args, pickPort: opts.pickPort ?? freePort, probe });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    port: sentinel.port,
    async stop() {
      await sentinel.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
