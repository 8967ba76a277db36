import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { startEmbeddedRedis, type EmbeddedRedis } from "../../src/embedded-redis.js";

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
    while (!String(await redis.call("CLUSTER", "INFO")).includes("cluster_state:ok")) await new Promise((resolve) => setTimeout(resolve, 20));
  } finally {
    redis.disconnect();
  }
}
