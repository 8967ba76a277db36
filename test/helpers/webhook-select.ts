import { readFileSync } from "node:fs";
import type { Redis } from "ioredis";
import type { WebhookEventType } from "../../src/config/types.js";
import { decodeStreamRecord } from "../../src/domain/stream-record.js";
import { boardParts, recordEvents } from "../../src/jobs/webhooks/kinds.js";

/**
 * The webhook selection (lua/includes/hooks.lua hookWanted) run in Redis, and what recordEvents
 * (src/jobs/webhooks/kinds.ts) makes of the same outcome: shared by
 * test/integration/webhook-select.test.ts and test/property/webhook-select.property.test.ts.
 */
export const HOOKS = readFileSync(new URL("../../lua/includes/hooks.lua", import.meta.url), "utf8");

/** The include's hookWanted, as the writers run it, on each case: ARGV is, per case, the outcome, k, then k wanted parts. */
const SELECT_EACH = `${HOOKS}
local out, i = {}, 1
while i <= #ARGV do
  local k = tonumber(ARGV[i + 1])
  local W = {}
  for j = i + 2, i + 1 + k do W[ARGV[j]] = true end
  local parts = {}
  for part in string.gmatch(ARGV[i], '[^;]+') do parts[#parts + 1] = part end
  out[#out + 1] = hookWanted(parts, W) and 1 or 0
  i = i + 2 + k
end
return out`;

/** Whether hookWanted selects each [outcome, wanted parts] case: one EVAL for them all. */
export async function selectedEach(redis: Redis, cases: readonly (readonly [string, readonly string[]])[]): Promise<boolean[]> {
  if (cases.length === 0) return [];
  const args = cases.flatMap(([outcome, wanted]) => [outcome, String(wanted.length), ...wanted]);
  return ((await redis.eval(SELECT_EACH, 0, ...args)) as number[]).map((r) => r === 1);
}

/** Whether hookWanted selects `outcome` (parts ";"-separated) when the parts `wanted` are wanted. */
export async function selected(redis: Redis, outcome: string, wanted: readonly string[]): Promise<boolean> {
  return (await selectedEach(redis, [[outcome, wanted]]))[0]!;
}

/** A record's fields as the writers append them (lua/includes/hooks.lua appendRecord), with outcome `outcome`. */
export const fieldsOf = (kind: string, outcome: string) => ["k", kind, "u", "ada", "t", "1780000000000", "z", "UTC", "e", "detail", "o", outcome];

/** The types of the events recordEvents gives a record with outcome `outcome`. */
export const eventTypesOf = (outcome: string): Set<WebhookEventType> =>
  new Set(recordEvents(decodeStreamRecord("1-0", fieldsOf("ev", outcome)), boardParts(fieldsOf("ev", outcome))).map((e) => e.type));

/** Whether a record with outcome `outcome` stands for an event of `type` (recordEvents). */
export const standsFor = (outcome: string, type: WebhookEventType) => eventTypesOf(outcome).has(type);

/**
 * The one record the selection keeps without an event of the type that wants it: a points part
 * with nothing added ("p:<sys>:0:..."), selected for points.changed though recordEvents gives
 * that type only when something was added (lua/includes/hooks.lua: the consumer filters anyway).
 */
export const keptForPointsChanged = (outcome: string) => /(^|;)p:[^:;]*:0:/.test(outcome);
