/**
 * Where Redis key names are built (in the manner of BullMQ's queue-keys.ts); the webhook
 * delivery's own keys are in src/jobs/webhooks/keys.ts, BullMQ's under its prefix {laurel-jobs}.
 *
 * Every key of a user carries the hash tag {<tenant>:<shard>}, so one user's keys, the shard's
 * counters and the shard's stream share a Redis Cluster slot and the event script stays atomic
 * on Cluster. Tenant-wide keys use {<tenant>}. Tenants never share a key: the tenant id is in
 * every tag, and it matches ^[a-z0-9][a-z0-9_-]*$ so it cannot contain a brace or a colon.
 *
 * Layout (fields are documented where they are written: lua/event-2.lua):
 *   {t:s}:u:<user>          hash  the user's whole state (profile, totals, streak, idempotency keys)
 *   {t:s}:agg               hash  shard counters: users, ac:<achievement> (users per level are
 *                                  counted from pz at read time; versions before kept lv:<system>:<level>
 *                                  here, which nothing reads any more)
 *   {t:s}:x                 stream the shard's event records
 *   {t:s}:xh                stream the records the tenant's webhook endpoints want, each with "x", its
 *                                  entry id in {t:s}:x (written beside it: lua/includes/hooks.lua)
 *   {t:s}:pz:<system>       zset  users by points total
 *   {t:s}:aw:<system>:<user> list the user's recent awards in a system, newest first
 *   {t:s}:sa                zset  users with a streak, by current length (active when sd is in the future)
 *   {t:s}:sd                zset  users with a streak, by the instant (ms) it is lost
 *   {t:s}:sb                zset  users by longest streak ever
 *   {t:s}:sh:<user>         zset  the user's extended periods: score period, member "period:length"
 *                                  (":f" when a freeze covered the period)
 *   {t:s}:tt:<system>.<trigger> zset  users by the instant a time trigger next pays them
 *   {t:s}:ub                hash  every user boost of the shard: id → JSON record (admin listing)
 *   {t:s}:uv:<attr>:<value> set   users with that custom attribute value
 *   {t:s}:pa:<system>:<attr>:<value> zset  their totals in a system (points summary filter)
 *   {t:s}:lb:<board>:<run>[:<group>] zset  a run's participants (lua/includes/leaderboards.lua,
 *                                  which appends the run and group to boardRunHead; boardRun)
 *   {t:s}:lg:<board>:<run> set   a breakdown board's groups with entries in the run on the shard
 *                                  (lua/includes/leaderboards.lua; read by run retention)
 *   {t:s}:lh:<board>:<run>:<user> list  the user's rank history in the run, newest first
 *   {t:s}:ik:<metric>:<user>\x1f<key>  string  an Idempotency-Key of a tenant with an
 *                                  idempotency window: "<eventId>|<expiry ms>", expiring with the
 *                                  window (without a window, keys are fields of the user's hash).
 *                                  Neither ids nor keys hold control characters: \x1f separates.
 *   {t:s}:wr:<writer>       string the number of the writer's last event call or freeze grant
 *                                  applied on the shard, a little-endian double; expires a day
 *                                  after its last write (src/store/call-order.ts)
 *   {t}:meta                hash  first-seen and last-changed times of configured objects
 *   {t}:runs-deleted        hash  board → the first run not deleted yet (keepFinishedRuns:
 *                                  src/jobs/run-retention.ts)
 *   {t}:fixed               hash  settings the data is laid out by: shards, streak.frequency,
 *                                  leaderboards.<board> (each board's layout; checked at every
 *                                  start: src/store/fixed-settings.ts)
 *   {t}:time-scheduled      hash  time trigger's due set name (tt:<sys>.<trig>) → when the users who
 *                                  existed before the trigger were put on it (src/jobs/time-trigger-backfill.ts)
 *   {t}:lbc:<board>:<run>   hash  the run's counters (lua/includes/leaderboards.lua; read with every
 *                                  threshold, src/store/thresholds.ts): f, falls of values that may
 *                                  have held a place; n, entries added (a user's first in the run)
 *   {t}:run-groups-from     hash  breakdown board → the first run whose groups {t:s}:lg lists in
 *                                  full (written once, by the first start of a version that
 *                                  keeps the lists: earlier runs are found by SCAN)
 *   {t}:slots               hash  state name -> its index in every user's state array `s`, never
 *                                  changed or reused (src/store/state-slots.ts)
 *
 * Written by the stream worker (src/jobs/stream-worker.ts), never by the event path:
 *   {t:s}:b:<series>:<user> zset  daily buckets of one user in one series ("m:<metric>" or
 *                                  "p:<system>") before its open month: one member per month,
 *                                  score the monthly period, member
 *                                  "day:count:change:totalAfter;..." (src/domain/buckets.ts)
 *   {t:s}:bl                hash  the open month of every series of the shard's users, its open
 *                                  (latest) day and the days of that month closed before it:
 *                                  field "<series>:<user>", value packed (lua/buckets/open-day.lua)
 *   {t:s}:xw                hash  consumer group → last stream id applied (the watermark); during an
 *                                  upgrade from a version whose webhook consumer read {t:s}:x itself,
 *                                  also "webhooks:cutover" (lua/hookUpgrade-3.lua)
 *
 * Read once for every request of a turn that asks the same (src/store/reads-in-batch.ts: a reply
 * shared by the turn's callers, or one call for all their items), each over every shard, and so
 * one command or call per shard on a Redis Cluster node (src/store/cross-shard.ts):
 *   {t:s}:agg               achievement counters (read-store.ts counters)
 *   {t:s}:pz:<system>       users per level, the points histogram (usersAtLevels, pointsHistogram;
 *                                  with {t:s}:agg, and {t:s}:uv and {t:s}:pa for a filter)
 *   {t:s}:sa, {t:s}:sd      the longest active streaks, streak ranks (activeStreaks, streakRank)
 *   {t:s}:sb                the longest streaks ever (longestStreaks)
 *   {t:s}:lb:<board>:<run>[:<group>]  a board page's entries, a rank, places among equal values
 *                                  (leaderboard-store.ts topEntries, rankOf, shardPlaces)
 *   {t:s}:u:<user>          names and hot state of the users a turn lists (names, users)
 * Every such key is built here, so that a read shared by a batch names the keys its callers' own
 * reads would.
 */

export { shardOf, userIdHash } from "../domain/shards.js";

export class TenantKeys {
  // Built once per shard: every key of a request starts with it (a number's text and three joins saved each time).
  private readonly prefixes: string[] = [];

  constructor(readonly tenantId: string) {}

  prefix(shard: number): string {
    return (this.prefixes[shard] ??= `{${this.tenantId}:${shard}}:`);
  }

  user(shard: number, userId: string): string {
    return `${this.prefix(shard)}u:${userId}`;
  }

  /** A user's rank history in a run of a board (list, newest first; written by lua/includes/leaderboards.lua). */
  rankHistory(shard: number, boardKey: string, run: number, userId: string): string {
    return `${this.prefix(shard)}lh:${boardKey}:${run}:${userId}`;
  }

  /** An Idempotency-Key of a tenant with an idempotency window (lua/event-2.lua KEYS[3]). */
  idempotency(shard: number, userId: string, metricKey: string, key: string): string {
    return `${this.prefix(shard)}ik:${metricKey}:${userId}\x1f${key}`;
  }

  /** The record of a writer's calls on a shard (src/store/call-order.ts). */
  writer(shard: number, writer: number): string {
    return `${this.prefix(shard)}wr:${writer}`;
  }

  agg(shard: number): string {
    return `${this.prefix(shard)}agg`;
  }

  stream(shard: number): string {
    return `${this.prefix(shard)}x`;
  }

  pointsZset(shard: number, systemKey: string): string {
    return `${this.prefix(shard)}pz:${systemKey}`;
  }

  awards(shard: number, systemKey: string, userId: string): string {
    return `${this.prefix(shard)}aw:${systemKey}:${userId}`;
  }

  userBoosts(shard: number): string {
    return `${this.prefix(shard)}ub`;
  }

  /** Daily buckets of one user in one series (src/domain/buckets.ts seriesOf*). */
  buckets(shard: number, series: string, userId: string): string {
    return `${this.prefix(shard)}b:${series}:${userId}`;
  }

  /** The shard's hook stream: the name is the stream's with "h" appended (lua/includes/hooks.lua builds it so). */
  hookStream(shard: number): string {
    return `${this.stream(shard)}h`;
  }

  /** The open month of every series of the shard's users (field: domain/buckets.ts openDayField). */
  openMonths(shard: number): string {
    return `${this.prefix(shard)}bl`;
  }

  watermarks(shard: number): string {
    return `${this.prefix(shard)}xw`;
  }


  streakActive(shard: number): string {
    return `${this.prefix(shard)}sa`;
  }

  streakDeadline(shard: number): string {
    return `${this.prefix(shard)}sd`;
  }

  streakBest(shard: number): string {
    return `${this.prefix(shard)}sb`;
  }

  streakHistory(shard: number, userId: string): string {
    return `${this.prefix(shard)}sh:${userId}`;
  }

  runsDeleted(): string {
    return `{${this.tenantId}}:runs-deleted`;
  }

  fixed(): string {
    return `{${this.tenantId}}:fixed`;
  }

  timeScheduled(): string {
    return `{${this.tenantId}}:time-scheduled`;
  }

  runGroupsFrom(): string {
    return `{${this.tenantId}}:run-groups-from`;
  }

  /** A time trigger's due set: the shard's users by the instant it next pays them (store/rules.ts timeTriggerZset names it for the scripts). */
  timeDue(shard: number, systemKey: string, triggerKey: string): string {
    return `${this.prefix(shard)}tt:${systemKey}.${triggerKey}`;
  }

  /** The shard's users with a custom attribute value (lua/includes/user.lua keeps it; the points summary filter reads it). */
  attributeUsers(shard: number, attr: string, value: string): string {
    return `${this.prefix(shard)}uv:${attr}:${value}`;
  }

  /** Their totals in a points system (lua/includes/points.lua, user.lua keep it). */
  attributePoints(shard: number, systemKey: string, attr: string, value: string): string {
    return `${this.prefix(shard)}pa:${systemKey}:${attr}:${value}`;
  }

  /** A run's counters (falls, entries added: lua/includes/leaderboards.lua); "" gives the head the scripts append the run to. */
  boardCounters(boardKey: string, run: number | ""): string {
    return `{${this.tenantId}}:lbc:${boardKey}:${run}`;
  }

  /**
   * What a run's participants on a shard are named by, before the run: lua/includes/leaderboards.lua
   * appends the run (and ":<group>") to it (store/rules.ts gives the scripts one a shard).
   */
  boardRunHead(shard: number, boardKey: string): string {
    return `${this.prefix(shard)}lb:${boardKey}:`;
  }

  /** A run's participants on a shard: of the whole board, or of one breakdown group ("" for none). */
  boardRun(shard: number, boardKey: string, run: number, group = ""): string {
    return `${this.boardRunHead(shard, boardKey)}${run}${group === "" ? "" : `:${group}`}`;
  }

  /** A breakdown board's groups with entries in the run on the shard. */
  runGroups(shard: number, boardKey: string, run: number): string {
    return `${this.prefix(shard)}lg:${boardKey}:${run}`;
  }

  meta(): string {
    return `{${this.tenantId}}:meta`;
  }

  /** The state slots registry (src/store/state-slots.ts). */
  slots(): string {
    return `{${this.tenantId}}:slots`;
  }
}
