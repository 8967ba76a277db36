import type { Redis } from "ioredis";
import type { LuaSource } from "./lua-loader.js";

/**
 * How scripts run. "function" (the default) loads each script as a Redis Function library and
 * calls it with FCALL: the rules table is built once per library load. "eval" sends EVALSHA and
 * pays for building the rules table on every call (about 11 µs of Redis time per event on the
 * demo tenant, measured in bench/README.md). Both are one command per request.
 */
export type ScriptMode = "function" | "eval";

export function scriptModeFromEnv(env: NodeJS.ProcessEnv = process.env): ScriptMode {
  return env.LAUREL_LUA === "eval" ? "eval" : "function";
}

let mode: ScriptMode = scriptModeFromEnv();

export function setScriptMode(next: ScriptMode): void {
  mode = next;
}

async function load(redis: Redis, script: LuaSource): Promise<void> {
  if (mode === "eval") {
    await redis.script("LOAD", script.text);
    return;
  }
  try {
    await redis.function("LOAD", script.library);
  } catch (err) {
    // Content-addressed: a library of this name already holds exactly this code.
    if (!(err instanceof Error) || !err.message.includes("already exists")) throw err;
  }
}

/**
 * Numbers for a script as one argument of little-endian doubles, which Lua's struct.unpack reads
 * for a fraction of what `tonumber` of decimal text costs (strtod, ~1.8k instructions each;
 * bench/README.md, "Instructions per event script"). Integers up to 2^53 travel exactly. The price
 * is in Node: ioredis serialises a command holding a Buffer in its slower buffer mode.
 */
export function packDoubles(values: readonly number[]): Buffer {
  const buf = Buffer.allocUnsafe(8 * values.length);
  for (let i = 0; i < values.length; i++) buf.writeDoubleLE(values[i]!, 8 * i);
  return buf;
}

/**
 * Runs a script, loading it when Redis does not have it (a restarted or failed-over Redis, or a
 * FUNCTION FLUSH) and retrying once, as ioredis' Script does for NOSCRIPT.
 */
export async function runScript(redis: Redis, script: LuaSource, keys: string[], args: (string | number | Buffer)[]): Promise<unknown> {
  const call = () =>
    mode === "eval"
      ? redis.evalsha(script.sha, script.numKeys, ...keys, ...args)
      : redis.fcall(script.functionName, script.numKeys, ...keys, ...args);
  try {
    return await call();
  } catch (err) {
    const message = err instanceof Error ? err.message : "";
    if (!message.startsWith("NOSCRIPT") && !message.includes("Function not found")) throw err;
    await load(redis, script);
    return call();
  }
}

export async function preloadScripts(redis: Redis, scripts: Iterable<LuaSource>): Promise<void> {
  const seen = new Set<string>();
  for (const script of scripts) {
    if (seen.has(script.sha)) continue;
    seen.add(script.sha);
    await load(redis, script);
  }
}
