import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startEmbeddedRedis, type EmbeddedRedis } from "../../src/embedded-redis.js";

/** A throwaway redis-server on a free port, without persistence unless asked for. */
export async function startTestRedis(opts: { appendOnly?: boolean; dir?: string } = {}): Promise<EmbeddedRedis & { dir: string }> {
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), "laurel-redis-"));
  const server = await startEmbeddedRedis({ dir, appendOnly: opts.appendOnly ?? false });
  return {
    ...server,
    dir,
    async stop() {
      await server.stop();
      if (!opts.dir) rmSync(dir, { recursive: true, force: true });
    },
  };
}
