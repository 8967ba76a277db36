import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * Loads lua/<name>-<numKeys>.lua, inlining `-- @include "file"` lines once each (in the manner
 * of BullMQ's script-loader) and replacing the `--@rules` line with a literal rules table.
 * The number of KEYS comes from the file name, so a wrapper and its script cannot disagree.
 */
const LUA_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "../../lua");

export interface LuaSource {
  name: string;
  /** The keys every call passes (the name's suffix); a script may take optional ones after them (event-2: KEYS[3]). */
  numKeys: number;
  /** The EVAL form: the rules literal, then the body. */
  text: string;
  sha: string;
  /**
   * The same script as a Redis Function library (FUNCTION LOAD / FCALL): the rules table is
   * built once when the library loads instead of on every call. Content-addressed, so two
   * processes with different configs never overwrite each other's library.
   */
  library: string;
  functionName: string;
}

const INCLUDE = /^--\s*@include\s+"([^"]+)"\s*$/;
/** Markers, each alone on its line: where the rules literal goes, and where the call begins. */
const RULES_MARK = /^--@rules$/m;
const BODY_MARK = /^--@body$/m;
/**
 * A script that never writes says so (`--@no-writes`): its function is registered with Redis's
 * no-writes flag. Redis refuses a function without it when at maxmemory, before running it, as a
 * command that may write, so every read by script answered 503 there (EVALSHA defers the check
 * to the first write, so eval mode read on). The marker is in the text, so in the name too.
 */
const NO_WRITES_MARK = /^--@no-writes$/m;
/**
 * A script that does one shard's work, which a call asks of several shards at once: its call
 * passes numKeys keys per shard, shard after shard, and gets an array of the replies, one per
 * shard in the order of the keys (store/cross-shard.ts: a standalone Redis runs a script on keys
 * of any slots; a Cluster node is given one shard a call). Below `--@each-shard` (alone on its
 * line, under `--@body`) is the shard's part, which reads its shard's keys as KEYS[1..numKeys]
 * and returns the shard's reply; above it, what every shard shares, run once a call (the
 * arguments read, strings built): run per shard, that cost ~5 µs of a 16-shard read's ~34
 * (the streak rank's script of the forty-sixth stop, bench/README.md).
 * `--@each-shard <name>`: a shard's keys are as many as the shared part's local `<name>` says
 * (at least numKeys): a call whose arguments decide which keys each shard reads passes them all
 * in KEYS (lua/pointsHistogram-2.lua: a filter's groups), as many for every shard.
 */
const EACH_SHARD_MARK = /^--@each-shard(?: ([A-Za-z_][A-Za-z0-9_]*))?$/m;

/**
 * Every read-only script loaded so far (the modules that read load theirs as they are imported).
 * The start loads them into Redis with the tenants' scripts: loaded on first use instead, a read
 * at maxmemory could not load its script (FUNCTION LOAD is a write) and failed.
 */
export const READ_SCRIPTS = new Set<LuaSource>();
const fileCache = new Map<string, string>();

function readLua(path: string): string {
  let text = fileCache.get(path);
  if (text === undefined) {
    text = readFileSync(path, "utf8");
    fileCache.set(path, text);
  }
  return text;
}

function inline(path: string, seen: Set<string>, stack: string[]): string {
  if (stack.includes(path)) throw new Error(`lua include cycle: ${[...stack, path].join(" -> ")}`);
  const lines = readLua(path).split("\n");
  const out: string[] = [];
  lines.forEach((line, i) => {
    const match = INCLUDE.exec(line.trim());
    if (!match) {
      out.push(line);
      return;
    }
    const target = join(LUA_DIR, match[1]!);
    if (seen.has(target)) throw new Error(`${path}:${i + 1}: "${match[1]}" is included twice`);
    seen.add(target);
    out.push(inline(target, seen, [...stack, path]));
  });
  return out.join("\n");
}

export function loadLua(name: string, rules?: unknown): LuaSource {
  const match = /^(.*)-(\d+)$/.exec(name);
  if (!match) throw new Error(`lua script name must be <name>-<numKeys>: ${name}`);
  const body = inline(join(LUA_DIR, `${name}.lua`), new Set(), []);
  let rulesLine = "";
  if (RULES_MARK.test(body)) {
    if (rules === undefined) throw new Error(`${name}.lua needs rules`);
    rulesLine = `local R = ${toLuaLiteral(rules)}`;
  }
  const source = body.replace(RULES_MARK, rulesLine);
  // Above the body mark: helpers and rules (a Function library builds them once); below: the call.
  const mark = BODY_MARK.exec(source);
  const prelude = mark ? source.slice(0, mark.index) : "";
  const numKeys = Number(match[2]);
  const afterBody = mark ? source.slice(mark.index + mark[0].length) : source;
  const eachShard = EACH_SHARD_MARK.exec(afterBody);
  const call = eachShard
    ? everyShardCall(afterBody.slice(0, eachShard.index), afterBody.slice(eachShard.index + eachShard[0].length), eachShard[1] ?? String(numKeys))
    : afterBody;
  const text = `${prelude}${call}`;
  const sha = createHash("sha1").update(text).digest("hex");
  const functionName = `laurel_${sha.slice(0, 20)}`;
  const readOnly = NO_WRITES_MARK.test(body);
  const register = readOnly
    ? [`redis.register_function{function_name='${functionName}', flags={'no-writes'}, callback=function(KEYS, ARGV)`, call, "end}"]
    : [`redis.register_function('${functionName}', function(KEYS, ARGV)`, call, "end)"];
  const library = [`#!lua name=${functionName}`, prelude, ...register].join("\n");
  const loaded = { name, numKeys, text, sha, library, functionName };
  if (readOnly) READ_SCRIPTS.add(loaded);
  return loaded;
}

/**
 * The call of a script with an `--@each-shard` part: the shared part, then the shard's part as a
 * local function run on each shard's keys in turn, its replies gathered in order. One table
 * holds the shard's keys, refilled for each shard (a table a shard cost ~5 µs of a 16-shard
 * read): the shard's part must not keep KEYS. `perShard`: a shard's key count, a number or the
 * name of a local of the shared part.
 */
function everyShardCall(shared: string, oneShard: string, perShard: string): string {
  return [
    shared,
    "local oneShard = function(KEYS)",
    oneShard,
    "end",
    "local all, replies, keys = KEYS, {}, {}",
    `for base = 0, #all - ${perShard}, ${perShard} do`,
    `  for i = 1, ${perShard} do keys[i] = all[base + i] end`,
    `  replies[base / ${perShard} + 1] = oneShard(keys)`,
    "end",
    "return replies",
  ].join("\n");
}

/** A JSON-like value as a Lua table constructor. Integers only: rules carry no fractions. */
export function toLuaLiteral(value: unknown): string {
  if (value === null || value === undefined || value === false) return "false";
  if (value === true) return "true";
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new Error(`cannot encode ${value} in Lua rules`);
    return Number.isInteger(value) ? value.toFixed(0) : String(value);
  }
  if (typeof value === "string") return luaString(value);
  if (Array.isArray(value)) return `{${value.map(toLuaLiteral).join(",")}}`;
  if (typeof value === "object") {
    const parts = Object.entries(value as Record<string, unknown>).map(([k, v]) =>
      /^[A-Za-z_][A-Za-z0-9_]*$/.test(k) ? `${k}=${toLuaLiteral(v)}` : `[${luaString(k)}]=${toLuaLiteral(v)}`,
    );
    return `{${parts.join(",")}}`;
  }
  throw new Error(`cannot encode ${typeof value} in Lua rules`);
}

function luaString(s: string): string {
  let out = '"';
  for (const byte of Buffer.from(s, "utf8")) {
    if (byte === 0x22) out += '\\"';
    else if (byte === 0x5c) out += "\\\\";
    else if (byte >= 0x20 && byte < 0x7f) out += String.fromCharCode(byte);
    else out += `\\${byte.toString().padStart(3, "0")}`;
  }
  return `${out}"`;
}
