import { loadLua } from "../../store/lua-loader.js";
import { runScript } from "../../store/redis-script.js";
import type { DeliveryJob } from "./deliveries.js";
import { coalescedEventId } from "./kinds.js";
import { WebhookKeys } from "./keys.js";
import type { Payload, PayloadContext } from "./payloads.js";

/**
 * Optional coalescing (README: Webhooks, Coalescing). An endpoint with `coalesce: {type: N}`
 * gets at most one event of that type per user and subject (points system, leaderboard run) in
 * each window of N minutes of the service clock ([k·N, (k+1)·N) since the epoch). The event is
 * queued when the window closes (the timeline's tick) and carries the last change's state:
 *
 *   points.changed            `points` of the last change, `added` the net change over the
 *                             window, `awards` those of the last change;
 *   leaderboard.rank_changed  `rank`/`value` of the last change, `previousRank`/`previousValue`
 *                             of the first.
 *
 * Its id is a UUIDv5 of the endpoint, type, user, subject and window, so each change is in
 * exactly one coalesced event. lua/coalescePut-2.lua keeps the first and last change of a window
 * by stream id, whichever order the consumers see them in. Which types may be coalesced is
 * checked with the config (src/config/compile.ts).
 */
const putScript = loadLua("coalescePut-2");
const doneScript = loadLua("coalesceDone-2");
const FLUSH_BATCH = 500;

export interface CoalescedChange {
  endpoint: string;
  windowMs: number;
  streamId: string;
  /** Service time of the change, ms. */
  ms: number;
  userId: string;
  subject: string;
  payload: Omit<Payload, "id">;
}

type Json = Record<string, unknown>;

function merge(type: string, first: Json, last: Json): Json {
  if (type === "points.changed") {
    const a = first.points as Json;
    const b = last.points as Json;
    return { ...last, points: { ...b, added: (b.total as number) - ((a.total as number) - (a.added as number)) } };
  }
  if (type === "leaderboard.rank_changed") {
    const a = first.leaderboard as Json;
    return { ...last, leaderboard: { ...(last.leaderboard as Json), previousRank: a.previousRank, previousValue: a.previousValue } };
  }
  return last;
}

export class Coalescer {
  private readonly keys: WebhookKeys;

  constructor(private readonly ctx: PayloadContext) {
    this.keys = new WebhookKeys(ctx.tenant.id);
  }

  async put(changes: readonly CoalescedChange[]): Promise<void> {
    await Promise.all(
      changes.map((c) => {
        const window = Math.floor(c.ms / c.windowMs);
        const key = [c.endpoint, c.payload.type, c.userId, c.subject, window].join("|");
        return runScript(this.ctx.store.redis, putScript, [this.keys.coalesced(), this.keys.coalesceDue()], [key, c.streamId, (window + 1) * c.windowMs, JSON.stringify(c.payload)]);
      }),
    );
  }

  /** Queues the events of every window closed by `now`; returns how many. */
  async flush(now: number, enqueue: (jobs: DeliveryJob[]) => Promise<unknown>): Promise<number> {
    const redis = this.ctx.store.redis;
    let queued = 0;
    for (;;) {
      const due = await redis.zrangebyscore(this.keys.coalesceDue(), "-inf", now, "LIMIT", 0, FLUSH_BATCH);
      if (due.length === 0) return queued;
      const held = due.length === 0 ? [] : await redis.hmget(this.keys.coalesced(), ...due.flatMap((k) => [`${k}|f`, `${k}|l`]));
      const jobs: DeliveryJob[] = [];
      const done: string[] = [];
      due.forEach((key, i) => {
        const first = held[2 * i];
        const last = held[2 * i + 1];
        done.push(key, first ?? "", last ?? "");
        if (!first || !last) return;
        const [endpoint, type] = key.split("|");
        const body = (text: string) => JSON.parse(text.slice(text.indexOf(" ") + 1)) as Json;
        const merged = merge(type!, body(first), body(last));
        const eventId = coalescedEventId(this.ctx.tenant.ns, this.ctx.tenant.id, key);
        const userId = ((merged.user as Json | undefined)?.id as string | undefined) ?? null;
        jobs.push({ endpoint: endpoint!, eventId, type: type!, userId, body: JSON.stringify({ id: eventId, ...merged }) });
      });
      await enqueue(jobs);
      await runScript(redis, doneScript, [this.keys.coalesced(), this.keys.coalesceDue()], done);
      queued += jobs.length;
      if (due.length < FLUSH_BATCH) return queued;
    }
  }

  /** The instant the next open window closes, or null. */
  async nextClose(): Promise<number | null> {
    const first = await this.ctx.store.redis.zrange(this.keys.coalesceDue(), 0, 0, "WITHSCORES");
    return first.length === 2 ? Number(first[1]) : null;
  }
}
