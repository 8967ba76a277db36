import type { Redis } from "ioredis";
import type { LuaSource } from "./lua-loader.js";

/**
 * Runs a script by SHA, loading it on NOSCRIPT (a restarted or failed-over Redis has an empty
 * script cache) and retrying once, as ioredis' Script does. Scripts are also loaded at start
 * (preload) so the hot path normally never sees NOSCRIPT.
 */
export async function runScript(redis: Redis, script: LuaSource, keys: string[], args: (string | number)[]): Promise<unknown> {
  try {
    return await redis.evalsha(script.sha, script.numKeys, ...keys, ...args);
  } catch (err) {
    if (!(err instanceof Error) || !err.message.startsWith("NOSCRIPT")) throw err;
    await redis.script("LOAD", script.text);
    return redis.evalsha(script.sha, script.numKeys, ...keys, ...args);
  }
}

export async function preloadScripts(redis: Redis, scripts: Iterable<LuaSource>): Promise<void> {
  const seen = new Set<string>();
  for (const script of scripts) {
    if (seen.has(script.sha)) continue;
    seen.add(script.sha);
    const sha = await redis.script("LOAD", script.text);
    if (sha !== script.sha) throw new Error(`SCRIPT LOAD of ${script.name} returned ${String(sha)}, expected ${script.sha}`);
  }
}
