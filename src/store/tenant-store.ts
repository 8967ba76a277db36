import type { Redis } from "ioredis";
import type { CompiledTenant } from "../config/compiled.js";
import { fail } from "../domain/errors.js";
import { parseAwardRecord, type AwardRecord, type BoardChange, type EventInput, type EventOutcome, type PointsChange, type StreakState } from "../domain/outcome.js";
import { eventFiltersMatch } from "../domain/filters.js";
import { localDayIndex, periodOfDay, periodStartInstant, streakDeadline } from "../domain/periods.js";
import { activeRun } from "../domain/leaderboards.js";
import type { CompiledLeaderboard } from "../config/compiled.js";
import { ThresholdCache } from "./thresholds.js";
import { buildRules, type BuiltRules } from "./rules.js";
import { callOrderOf } from "./call-order.js";
import { idempotencyField } from "./fields.js";
import { shardOf, TenantKeys, userIdHash } from "./keys.js";
import { AwardPresence, processAwardPresence, systemSalt } from "./award-presence.js";
import { loadLua, type LuaSource } from "./lua-loader.js";
import { packDoubles, runScript, sendEncoded } from "./redis-script.js";
import { registerStateSlots, type StateSlots } from "./state-slots.js";
import { learnShardsPerCall } from "./cross-shard.js";
import { fmix32 } from "../domain/fmix32.js";

export const userBoostScript = loadLua("userBoost-3");
export const readUserScript = loadLua("readUser-1");
const SHARED_SCRIPTS = [userBoostScript, readUserScript];

export interface RecordedEvent {
  outcome: EventOutcome;
  /** The zone the event was evaluated in, and its local day and streak period at `now`. */
  tz: string;
  nowDay: number;
  nowPeriod: number;
}

interface EventScript {
  script: LuaSource;
  built: BuiltRules;
}

/**
 * Calls a script that needs the user's calendar may make when the zone Node guessed was not the
 * stored one (each answers the stored zone, and the next call uses it). Two were not enough: an
 * identify changing the zone between the first and the second call (a user travelling, an app
 * sending both at once) made an event, a freeze grant or a restore a 500 (found by an audit).
 * Each further change needs another identify to land in the gap of one round trip; past them the
 * request is a 503 (ZONE_CHANGING), which the SDK retries, and nothing is written.
 */
export const ZONE_ATTEMPTS = 8;

/**
 * Zones of users whose events omit `tz`: the event script must know the user's calendar, and
 * the stored zone is in Redis. Node guesses from this cache; the script checks the guess and
 * answers -1 with the stored zone when it was wrong, and Node calls again (ZONE_ATTEMPTS). An
 * identify or update that stores a zone puts it here too. Bounded, so it is a cache and never a
 * source of truth.
 */
export class ZoneCache {
  private readonly map = new Map<string, string>();
  constructor(private readonly max = 100_000) {}
  get(key: string): string | undefined {
    return this.map.get(key);
  }
  set(key: string, zone: string): void {
    if (this.map.size >= this.max) this.map.clear();
    this.map.set(key, zone);
  }
  /**
   * The zone an event was judged in, for the user's next event that sends none. UTC, the
   * default, is not stored for a user not cached; an unchanged zone is not written again, so the
   * cache keeps its string instead of taking each request's own (which would outlive its request
   * in an old map entry and be promoted, for nothing).
   */
  remember(key: string, zone: string): void {
    const known = this.map.get(key);
    if (known === zone || (known === undefined && zone === "UTC")) return;
    this.set(key, zone);
  }
}

// The flags of the event call (lua/event-2.lua ARGV[3], its 7th number).
const FLAGS_AT = 6 * 8;
const FLAG_ZONE_SENT = 1;
const FLAG_MAY_HAVE_RUN = 2;
const FLAG_SET_EXPIRY = 4;
// The call's number (call-order.ts), its 11th number: a retry after NOSCRIPT takes a new one.
const CALL_NUMBER_AT = 10 * 8;

/** Sets the flag that makes the event script read its writer's record (redis-script.ts MayHaveRun). */
function markMayHaveRun(numbers: Buffer): void {
  const flags = numbers.readDoubleLE(FLAGS_AT);
  if ((flags & FLAG_MAY_HAVE_RUN) === 0) numbers.writeDoubleLE(flags + FLAG_MAY_HAVE_RUN, FLAGS_AT);
}

/** Every script call of one tenant, with its KEYS and ARGV built in one place (BullMQ's scripts.ts). */
export class TenantStore {
  readonly keys: TenantKeys;
  private readonly eventScripts = new Map<string, EventScript>();
  readonly zones = new ZoneCache();
  readonly thresholds: ThresholdCache;
  /** Scripts that run with the whole tenant's rules (identify, completion, time ticks, admin). */
  readonly tenantScripts: Record<"user" | "complete" | "timeTick" | "streakAdmin", LuaSource>;
  readonly tenantRules: BuiltRules;
  /** The (user, system) pairs this process has seen awards of (every tenant's): what the metering read sends. */
  readonly awardPresence = processAwardPresence;
  private readonly systemSalts = new Map<string, number>();

  /**
   * Per board, the first run not deleted by run retention ({t}:runs-deleted) when this process
   * started: runs before it were deleted under an earlier, lower keepFinishedRuns, and reads
   * refuse them as no longer kept, not as runs nobody took part in (src/api/leaderboards.ts
   * selectRun). Runs deleted since are before the first kept run of this config (firstKeptRun).
   */
  runsDeletedBefore: ReadonlyMap<string, number> = new Map();

  /** Registers the tenant's state names (state-slots.ts), then builds its scripts. */
  static async open(redis: Redis, tenant: CompiledTenant): Promise<TenantStore> {
    await learnShardsPerCall(redis);
    const keys = new TenantKeys(tenant.id);
    const store = new TenantStore(redis, tenant, await registerStateSlots(redis, keys, tenant));
    if (tenant.leaderboards.some((b) => b.runUnit !== null)) {
      const deleted = await redis.hgetall(keys.runsDeleted());
      store.runsDeletedBefore = new Map(Object.entries(deleted).map(([board, run]) => [board, Number(run)]));
    }
    return store;
  }

  constructor(readonly redis: Redis, readonly tenant: CompiledTenant, readonly slots: StateSlots) {
    this.keys = new TenantKeys(tenant.id);
    this.thresholds = new ThresholdCache(this);
    this.tenantRules = buildRules(tenant, null, slots);
    const rules = this.tenantRules.rules;
    this.tenantScripts = {
      user: loadLua("user-3", rules),
      complete: loadLua("complete-4", rules),
      timeTick: loadLua("timeTick-4", rules),
      streakAdmin: loadLua("streakAdmin-9", rules),
    };
    for (const system of tenant.systems) this.systemSalts.set(system.key, systemSalt(tenant.id, system.key));
    for (const metric of tenant.metrics) {
      const built = buildRules(tenant, metric.key, slots);
      this.eventScripts.set(metric.key, { script: loadLua("event-2", built.rules), built });
    }
  }

  /**
   * This store on another connection, sharing everything else (scripts, caches, thresholds). The
   * webhook consumer reads through its own connection: a turn of it sends thousands of payload
   * reads at once, and on the event path's connection every event call waited behind them (p99
   * ~400 ms with every type subscribed; bench/README.md, "The tenth stop").
   */
  onConnection(redis: Redis): TenantStore {
    return Object.assign(Object.create(TenantStore.prototype) as TenantStore, this, { redis });
  }

  scripts(): LuaSource[] {
    return [...[...this.eventScripts.values()].map((e) => e.script), ...Object.values(this.tenantScripts), ...SHARED_SCRIPTS];
  }

  /**
   * The boards argument of every script that moves boards (lua/includes/leaderboards.lua
   * boardsOf): each board's current run (-1 while scheduled or finished), cached threshold, and
   * what was read with it (ThresholdCache): the run's falls, the room left, the entries added,
   * the instant of the read. The event script carries these numbers at the end of its ARGV[3]; the others take
   * boardsBlob. `activeRun` is recomputed per call: for perpetual and day-unit boards it is two
   * comparisons and a division, cheaper than a cache lookup.
   */
  boardNumbers(boards: readonly CompiledLeaderboard[], now: number): number[] {
    const numbers: number[] = [];
    for (const board of boards) {
      const run = activeRun(board, now);
      if (run === null) numbers.push(-1, 0, 0, 0, 0, 0);
      else {
        numbers.push(run);
        this.thresholds.pushNumbers(numbers, board, run);
      }
    }
    return numbers;
  }

  /** boardNumbers of all the tenant's boards as one argument (user, complete, time-tick, streak-admin scripts). */
  boardsBlob(now: number): Buffer {
    return packDoubles(this.boardNumbers(this.tenantRules.boards, now));
  }

  shard(userId: string): number {
    return shardOf(userId, this.tenant.shards);
  }

  async recordEvent(input: EventInput): Promise<RecordedEvent> {
    const entry = this.eventScripts.get(input.metricKey);
    if (!entry) fail("METRIC_NOT_FOUND");
    // The user's hash gives the shard and, after the call, the award presence bits (noteAwards).
    const userHash = userIdHash(input.userId);
    const shard = userHash % this.tenant.shards;
    const order = callOrderOf(this.redis);
    const writerKey = this.keys.writer(shard, order.writer);
    const keys = [this.keys.user(shard, input.userId), writerKey];
    // With or without a window: a key stored under one is honoured until it passes (lua/event-2.lua).
    if (input.idempotencyKey !== null) keys.push(this.keys.idempotency(shard, input.userId, input.metricKey, input.idempotencyKey));
    let tz = input.tz ?? this.zones.get(input.userId) ?? "UTC";
    const frequency = this.tenant.streak?.frequency ?? "daily";
    let mask = 0;
    for (const [trigger, bit] of entry.built.maskBits) if (eventFiltersMatch(trigger.eventAttributes, input.eventAttributes)) mask += bit;
    const profile = profileText(input.profile);
    const boards = this.boardNumbers(entry.built.boards, input.now);
    for (let attempt = 0; ; attempt++) {
      const nowDay = localDayIndex(input.now, tz);
      const nowPeriod = periodOfDay(nowDay, frequency);
      // lua/event-2.lua ARGV[3]; micro-unit values are bounded by maxTotal, inside 2^53.
      const numbers = packDoubles([
        input.now,
        input.valueMicro,
        nowPeriod,
        nowDay,
        streakDeadline(nowPeriod, frequency, tz),
        streakDeadline(nowPeriod - 1, frequency, tz),
        (input.tz === null ? 0 : FLAG_ZONE_SENT) + (order.expiryDue(writerKey) ? FLAG_SET_EXPIRY : 0),
        profile.digest,
        input.profile.length,
        mask,
        order.next(),
        periodStartInstant(nowPeriod, frequency, tz),
        periodStartInstant(nowPeriod - 1, frequency, tz),
        ...boards,
      ]);
      const args: (string | Buffer)[] = [
        this.keys.prefix(shard),
        input.userId,
        numbers,
        tz,
        input.idempotencyKey === null ? "" : idempotencyField(input.metricKey, input.idempotencyKey),
        // The record's local day and its month: the stream worker files the daily buckets by them
        // (lua/applyStream-2.lua), and only Node has the zone data to compute them.
        `${input.metricKey}|${input.valueMicro}|${input.eventId}|${nowDay}|${periodOfDay(nowDay, "monthly")}`,
        profile.text,
        // ARGV[8]: now as the records' text (Lua's %d truncates: so does Math.trunc).
        String(Math.trunc(input.now)),
      ];
      if (input.idempotencyKey !== null) args.push(input.eventId);
      const reply = (await runScript(this.redis, entry.script, keys, args, () => markMayHaveRun(numbers), () => numbers.writeDoubleLE(order.next(), CALL_NUMBER_AT))) as unknown[];
      const status = reply[0] as number;
      if (status === -1) {
        // The stored zone differs from the guess: nothing was written; evaluate in the stored zone.
        if (attempt + 1 >= ZONE_ATTEMPTS) fail("ZONE_CHANGING");
        tz = reply[1] as string;
        this.zones.set(input.userId, tz);
        continue;
      }
      if (status === -2) fail("TOTAL_OUT_OF_RANGE");
      const outcome = decodeEventReply(reply, input.eventId);
      if (outcome.kind === "processed") this.noteAwards(userHash, outcome.points);
      // A replay writes nothing, the zone it sent included: the script then answers the stored
      // zone, and the streak is read on that calendar (lua/event-2.lua step 3). Read on the sent
      // zone's, a live streak could be answered as lost.
      const storedZone = status === 2 ? (reply[EVENT_REPLY_HEAD] as string | undefined) : undefined;
      if (storedZone !== undefined && storedZone !== tz) {
        const day = localDayIndex(input.now, storedZone);
        this.zones.remember(input.userId, storedZone);
        return { outcome, tz: storedZone, nowDay: day, nowPeriod: periodOfDay(day, frequency) };
      }
      this.zones.remember(input.userId, tz);
      return { outcome, tz, nowDay, nowPeriod };
    }
  }

  /**
   * The metering read, one round trip: null for an unknown user. Every change of a points total
   * appends an award record carrying the total after it (lua/includes/points.lua), so the newest
   * record holds the current total: one plain LRANGE, no script, no state to unpack. An empty
   * list cannot tell a total of 0 from an unknown user, which an EXISTS of the user's hash does.
   * For a (user, system) pair this process has seen awards of (award-presence.ts) the list is not
   * empty, and the LRANGE goes alone; for the others the EXISTS goes with it, in the same write
   * (write-coalescing.ts), and its reply is used only when the list is empty. Only a pair whose
   * presence bit another pair set, by chance, and whose list is empty sends the EXISTS after the
   * LRANGE's reply: a second round trip.
   */
  async readUserPoints(userId: string, systemKey: string, awards: number): Promise<{ total: number; awards: AwardRecord[] } | null> {
    const hash = userIdHash(userId);
    const shard = hash % this.tenant.shards;
    const presence = this.awardPresenceIndex(hash, systemKey);
    const seen = this.awardPresence.has(presence);
    const userExists = () => sendEncoded(this.redis, "exists", [this.keys.user(shard, userId)]);
    // Encoded as the event call is: ioredis' own lrange pays its argument flattening (redis-script.ts).
    const list = sendEncoded(this.redis, "lrange", [this.keys.awards(shard, systemKey, userId), 0, awards - 1]) as Promise<string[]>;
    const exists = seen ? null : userExists();
    // Unread when the list holds records; its failure then is the LRANGE's too.
    exists?.catch(() => undefined);
    const newest = await list;
    if (newest.length > 0) {
      if (!seen) this.awardPresence.add(presence);
      const records = newest.map(parseAwardRecord);
      return { total: records[0]!.total, awards: records };
    }
    return (await (exists ?? userExists())) ? { total: 0, awards: [] } : null;
  }

  /** Marks the systems an event changed for its user as seen (award-presence.ts): the user's next metering read of them is one LRANGE. */
  private noteAwards(userHash: number, points: readonly PointsChange[]): void {
    for (const change of points) this.awardPresence.add(this.awardPresenceIndex(userHash, change.systemKey));
  }

  /** The award presence bit of a user (userIdHash) in one of this tenant's systems. */
  awardPresenceIndex(userHash: number, systemKey: string): number {
    return AwardPresence.index(userHash, this.systemSalts.get(systemKey)!);
  }
}

/**
 * The profile fields an event sent, as lua/event-2.lua ARGV[7] takes them ("field\0value\0...";
 * values never hold control characters: user-input.ts), and their digest: the script compares
 * it with the digest of the last profile an event applied and reads and writes no profile field
 * when they are equal. A collision would leave one event's profile change unapplied; the digest
 * is 53 bits (digest53: two FNV-1a lanes with a murmur finalizer), so for profiles a client did
 * not craft against it the odds are about 2^-53. It is
 * not a security boundary: only the tenant's own backend sends profiles.
 */
export function profileText(profile: readonly (readonly [string, string])[]): { text: string; digest: number } {
  if (profile.length === 0) return { text: "", digest: 0 };
  let text = "";
  for (const [field, value] of profile) text += `${field}\0${value}\0`;
  return { text, digest: digest53(text) };
}

function digest53(text: string): number {
  // Two FNV-1a lanes over the UTF-16 code units (different offset bases), each finished with
  // MurmurHash3's fmix32 so that every input bit reaches every output bit; 21 + 32 bits kept.
  let a = 0x811c9dc5;
  let b = 0x050c5d1f;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x01000193) ^ (b >>> 15);
  }
  return 4294967296 * (fmix32(b) & 0x1fffff) + (fmix32(a) >>> 0);
}

/** The stored streak as a script replies it: {length, start, last, extended, freezes, grants, createdDay, startDay, grantDay}. */
function decodeStreak(raw: readonly unknown[]): StreakState {
  const orNull = (v: unknown): number | null => (v === null || v === undefined ? null : (v as number));
  return {
    length: raw[0] as number,
    startPeriod: orNull(raw[1]),
    lastPeriod: orNull(raw[2]),
    freezes: orNull(raw[4]),
    grants: orNull(raw[5]) ?? 0,
    createdDay: orNull(raw[6]),
    startDay: orNull(raw[7]),
    grantDay: orNull(raw[8]),
  };
}

/** One board entry a script moved: boardKey, run, oldValue|null, newValue, breakdown, rank|null, previousRank|null, threshold. */
function decodeBoard(entry: readonly unknown[]): BoardChange {
  return {
    boardKey: entry[0] as string,
    run: entry[1] as number,
    oldValue: (entry[2] as number | null) ?? null,
    newValue: entry[3] as number,
    breakdown: (entry[4] as string | null) ?? "",
    rank: (entry[5] as number | null) ?? null,
    previousRank: (entry[6] as number | null) ?? null,
    threshold: Number(entry[7]),
  };
}

/** flushPoints' entries (lua/includes/points.lua), as the complete, user and streak scripts reply them: {systemKey, added, total, before, award...}. */
export function decodePoints(raw: unknown[][]): PointsChange[] {
  return raw.map((entry) => ({
    systemKey: entry[0] as string,
    added: entry[1] as number,
    total: entry[2] as number,
    before: entry[3] as number,
    awards: (entry.slice(4) as string[]).map(parseAwardRecord),
  }));
}

/** Values before the counted parts of the event script's reply (lua/event-2.lua REPLY_HEAD). */
const EVENT_REPLY_HEAD = 12;

/** The event script's flat reply (lua/event-2.lua, "Reply"): a head of 12 values, then counted parts. */
function decodeEventReply(reply: unknown[], eventId: string): EventOutcome {
  const streakRaw = reply.slice(3, EVENT_REPLY_HEAD);
  if (reply[0] === 2) {
    return { kind: "replay", eventId: reply[1] as string, totalMicro: reply[2] as number, streak: decodeStreak(streakRaw) };
  }
  if (reply[0] === 3) return { kind: "resent", eventId, totalMicro: reply[2] as number, streak: decodeStreak(streakRaw) };
  let at = EVENT_REPLY_HEAD;
  const take = (n: number): unknown[] => reply.slice(at, (at += n));
  const achievements = take(reply[at++] as number) as string[];
  const points: PointsChange[] = [];
  for (let systems = reply[at++] as number; systems > 0; systems--) {
    const [systemKey, added, total, before] = take(4) as [string, number, number, number];
    points.push({ systemKey, added, total, before, awards: (take(reply[at++] as number) as string[]).map(parseAwardRecord) });
  }
  const boards: BoardChange[] = [];
  for (let entries = reply[at++] as number; entries > 0; entries--) boards.push(decodeBoard(take(8)));
  return {
    kind: "processed",
    eventId,
    totalMicro: reply[2] as number,
    streak: decodeStreak(streakRaw),
    extended: streakRaw[3] === 1,
    achievements,
    points,
    boards,
  };
}
