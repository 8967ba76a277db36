// Buffer imported, not the global: Node 20 defines globalThis.Buffer as an accessor, so every
// bare `Buffer` in a hot path ran its getter (~0.4k instructions; bench/README.md, "The fifteenth stop").
import { Buffer } from "node:buffer";
import { Command, type Redis } from "ioredis";
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
 * is in Node, small since runScript encodes such a command itself (encodeCommand).
 */
export function packDoubles(values: readonly number[]): Buffer {
  const buf = Buffer.allocUnsafe(8 * values.length);
  for (let i = 0; i < values.length; i++) buf.writeDoubleLE(values[i]!, 8 * i);
  return buf;
}

/**
 * A command as RESP: text when every argument is text (the socket encodes it as it writes, as
 * ioredis does), else one buffer. ioredis serialises a command holding a Buffer argument in its
 * buffer mode: every argument its own Buffer, then a copy of them all (~3.5 µs for an event
 * script's call, measured).
 *
 * Nearly every argument is ASCII (keys, ids, zones, numbers), whose byte count is its length: the
 * text between binary arguments is joined with headers from the lengths and written in one call,
 * and the byte count that call returns proves the guess (any other character makes it longer);
 * when it does not, encodeExact starts over. Asking each argument its byte count first
 * (Buffer.byteLength, a native call each) cost an event call ~5k instructions more
 * (bench/README.md, "The sixteenth stop").
 */
export function encodeCommand(name: string, args: readonly (string | Buffer)[]): string | Buffer {
  let text = `*${args.length + 1}\r\n$${name.length}\r\n${name}`;
  let parts: (string | Buffer)[] | null = null;
  let bound = 0;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    // Two concatenations an argument, its head ("\r\n$<length>\r\n", the previous one's end
    // included) a string made once: a template of four parts a text argument cost the metering
    // read's LRANGE 21 StringAdds and 4 number conversions: 3.35k instructions in encodeCommand a read, now 2.55k (bench/read-cost.mjs).
    text += bulkHead(arg.length);
    if (typeof arg === "string") {
      text += arg;
    } else {
      (parts ??= []).push(text, arg);
      bound += 3 * text.length + arg.length;
      text = "";
    }
  }
  text += "\r\n";
  // The metering read's LRANGE: text, which the socket writes as ioredis would.
  if (parts === null) return Buffer.byteLength(text) === text.length ? text : encodeExact(name, args);
  parts.push(text);
  bound += 3 * text.length;
  const out = Buffer.allocUnsafe(bound);
  const raw = out as unknown as RawWriters;
  let at = 0;
  for (const part of parts) {
    if (typeof part === "string") {
      const bytes = raw.utf8Write(part, at);
      if (bytes !== part.length) return encodeExact(name, args);
      at += bytes;
    } else {
      at += part.copy(out, at);
    }
  }
  return out.subarray(0, at);
}

/** "\r\n$<n>\r\n" for the lengths most arguments have, made once. */
const BULK_HEADS = Array.from({ length: 256 }, (_, n) => `\r\n$${n}\r\n`);

/** What ends one argument of a command and starts the next, of `length` (a count that is bytes only when the text is ASCII, as encodeCommand checks). */
function bulkHead(length: number): string {
  return length < BULK_HEADS.length ? BULK_HEADS[length]! : `\r\n$${length}\r\n`;
}

/** Buffer's own UTF-8 writer, which `buf.write(text, at, "utf8")` reaches after parsing its arguments (not in @types/node). */
type RawWriters = { utf8Write(text: string, offset: number): number };

/**
 * encodeCommand for text that is not all ASCII (rare: a user id or profile value outside it):
 * each argument's byte count asked first, the way encodeCommand did before the ASCII guess.
 */
function encodeExact(name: string, args: readonly (string | Buffer)[]): string | Buffer {
  let text = `*${args.length + 1}\r\n$${Buffer.byteLength(name)}\r\n${name}\r\n`;
  const parts: Buffer[] = [];
  for (const arg of args) {
    if (typeof arg === "string") {
      text += `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`;
    } else {
      parts.push(Buffer.from(`${text}$${arg.length}\r\n`), arg);
      text = "\r\n";
    }
  }
  if (parts.length === 0) return text;
  parts.push(Buffer.from(text));
  return Buffer.concat(parts);
}

/**
 * Called when a call may have run already: before ioredis re-sends it on a new connection (it
 * re-sends every command left unanswered when a connection drops). It may change the call's
 * Buffer arguments in place; the command is encoded again after it (src/store/call-order.ts).
 */
export type MayHaveRun = () => void;

/**
 * A command ioredis sends as encodeCommand builds it; replies as ioredis' own (utf8 strings).
 * Sent with sendCommand (sendEncoded), it bypasses ioredis' auto-pipelining (LAUREL_AUTOPIPELINE=1
 * pipelines every other command, not these); write coalescing (write-coalescing.ts) covers it.
 * ioredis asks for a command's bytes each time it writes it, with the socket it writes to (its
 * own Script relies on that): a second socket means a re-send, and `mayHaveRun` is told.
 *
 * A Command to ioredis (its prototype's methods, every field its constructor sets), but not built
 * by that constructor, which is shared by every kind of command the process makes: BullMQ's
 * scripts each define a subclass of Command (ioredis Script.js), and once its stores had seen
 * more object shapes than V8 keeps per site, each of its ~13 stores went through the generic
 * StoreIC (~1.5k instructions a metering read; bench/README.md, "The fifty-seventh stop"). These
 * stores see this class's shape alone. The constructor also copied its arguments with
 * Array.prototype.flat (~250 ns an argument on Node 20's generic path); these arguments come
 * flat, with numbers turned to text here as ioredis' constructor would.
 * test/unit/encode-command.test.ts holds the field list to ioredis' own, so that an ioredis that
 * sets another field fails a test rather than a command.
 */
export interface EncodedCommand extends Command {}
export class EncodedCommand {
  private declare encoded: string | Buffer | undefined;
  private declare written: boolean;
  private declare firstSocket: unknown;
  private declare mayHaveRun: MayHaveRun | undefined;
  constructor(name: string, args: readonly (string | number | Buffer)[], mayHaveRun?: MayHaveRun) {
    // ioredis' Command constructor and initPromise, in their order (ioredis 5.11.1), for a command
    // with no options but the reply's encoding, no callback, and arguments that need no transformer.
    const fields = this as unknown as CommandFields;
    fields.name = name;
    fields.inTransaction = false;
    fields.isTraced = false;
    fields.isResolved = false;
    fields.transformed = true;
    fields.replyEncoding = "utf8";
    fields.errorStack = undefined;
    fields.args = args.map((arg) => (typeof arg === "number" ? String(arg) : arg));
    fields.callback = undefined;
    fields.promise = new Promise((resolve, reject) => {
      fields.resolve = fields._convertValue(resolve);
      fields.reject = (err: Error) => {
        fields._clearTimers();
        reject(err);
      };
    });
    this.encoded = undefined;
    this.written = false;
    this.firstSocket = undefined;
    this.mayHaveRun = mayHaveRun;
  }
  toWritable(socket?: unknown): string | Buffer {
    if (this.mayHaveRun !== undefined) {
      if (!this.written) {
        this.written = true;
        this.firstSocket = socket;
      } else if (socket !== this.firstSocket) {
        this.mayHaveRun();
        this.mayHaveRun = undefined;
        this.encoded = undefined;
      }
    }
    this.encoded ??= encodeCommand(this.name, this.args as (string | Buffer)[]);
    return this.encoded;
  }
  /** The reply's Buffers as utf8 text, as ioredis' own does, with this module's Buffer (ioredis' reads the global's getter per element). */
  transformReply(result: Buffer | Buffer[]): string | string[] | Buffer | Buffer[] {
    return replyText(result) as string | string[];
  }
}
Object.setPrototypeOf(EncodedCommand.prototype, Command.prototype);

/** What ioredis' Command constructor sets, its private fields included, and the two methods it calls to do so. */
interface CommandFields {
  name: string;
  inTransaction: boolean;
  isTraced: boolean;
  isResolved: boolean;
  transformed: boolean;
  replyEncoding: BufferEncoding;
  errorStack: Error | undefined;
  args: (string | Buffer)[];
  callback: undefined;
  resolve: (result: unknown) => void;
  reject: (err: Error) => void;
  promise: Promise<unknown>;
  _convertValue(resolve: (value: unknown) => void): (result: unknown) => void;
  _clearTimers(): void;
}

function replyText(value: unknown): unknown {
  if (value instanceof Buffer) return value.toString();
  if (!Array.isArray(value)) return value;
  // In place: the parser built this array for this reply alone.
  for (let i = 0; i < value.length; i++) value[i] = replyText(value[i]);
  return value;
}

/**
 * A command of the hot paths (the event call, the metering read's LRANGE) as EncodedCommand
 * encodes it: its reply as ioredis gives it, text as utf8 strings.
 */
export function sendEncoded(redis: Redis, name: string, args: readonly (string | number | Buffer)[]): Promise<unknown> {
  return redis.sendCommand(new EncodedCommand(name, args)) as Promise<unknown>;
}

/**
 * Runs a script, loading it when Redis does not have it (a restarted or failed-over Redis, or a
 * SCRIPT/FUNCTION FLUSH) and retrying once, as ioredis' Script does for NOSCRIPT. `mayHaveRun`:
 * see MayHaveRun. `renumber`: gives the call a new number (call-order.ts) for its retry.
 *
 * The retry is the one place a numbered call can run after calls numbered above it, which the
 * lost-reply guard (lua/includes/call-order.lua) must not see: it keeps only the last number a
 * writer applied. So the load and the retry are sent back to back, not the retry after the
 * load's reply (calls sent during that round trip ran first), and the retry takes a new number,
 * so that it neither looks applied nor sets the writer's record back: the failed attempt was
 * the call's first send, since a re-send cannot meet NOSCRIPT (below).
 * A re-sent call keeps its number (its first send may have run) and goes as EVAL with the
 * script's text, the same code as the library's function, in both modes: it runs in its place
 * on the new connection, before any call sent behind it. Sent as FCALL or EVALSHA, it met NOSCRIPT
 * after a restart and was retried behind those calls; once one of them ran (another connection
 * had loaded the script), its number read as applied, and an event that never ran was
 * acknowledged and not counted (bench/chaos.mjs; lost-reply.test.ts, "an event that never ran").
 * Both modes send their command encoded here (EncodedCommand), so both know which sends are re-sends.
 */
export async function runScript(
  redis: Redis,
  script: LuaSource,
  keys: readonly string[],
  args: (string | number | Buffer)[],
  mayHaveRun?: MayHaveRun,
  renumber?: () => void,
): Promise<unknown> {
  if (keys.length < script.numKeys) throw new Error(`${script.name} takes at least ${script.numKeys} keys, got ${keys.length}`);
  const call = (): Promise<unknown> => {
    const command: EncodedCommand = new EncodedCommand(
      mode === "eval" ? "evalsha" : "fcall",
      [mode === "eval" ? script.sha : script.functionName, keys.length, ...keys, ...args],
      mayHaveRun &&
        (() => {
          mayHaveRun();
          command.name = "eval";
          command.args[0] = script.text;
        }),
    );
    return redis.sendCommand(command) as Promise<unknown>;
  };
  try {
    return await call();
  } catch (err) {
    const message = err instanceof Error ? err.message : "";
    if (!message.startsWith("NOSCRIPT") && !message.includes("Function not found")) throw err;
    renumber?.();
    // Both sent at once, both awaited (neither goes unhandled). A failed load fails the retry
    // too, and its error is the one that says why: Redis at maxmemory refuses FUNCTION LOAD
    // ("OOM ...", a 503), and the retry's "Function not found" made it a 500.
    const [loaded, reply] = await Promise.allSettled([load(redis, script), call()]);
    // A call that ran is the answer, whatever the load said (another connection loaded it).
    if (reply.status === "fulfilled") return reply.value;
    throw loaded.status === "rejected" ? loaded.reason : reply.reason;
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
