import type { CompiledLeaderboard } from "../config/compiled.js";
import { firstKeptRun, memberUser } from "../domain/leaderboards.js";
import { boardKeys } from "../store/leaderboard-store.js";
import type { TenantStore } from "../store/tenant-store.js";
import { JOB_OPTIONS, jobsPrefix, removeStaleScheduler, TenantJobQueue, TenantJobsSet, type TenantJobs, type TenantJobsOptions } from "./tenant-job-queue.js";

/**
 * Leaderboard run retention (`keepFinishedRuns`): a board with runs gains a sorted set per shard
 * (and per breakdown group) and a rank history per user on the board for every run, and finished
 * runs stay readable, so a daily board grows by a day of participants every day. With
 * keepFinishedRuns a board keeps its newest finished runs (and the active one); this job deletes
 * the runs before them (domain/leaderboards.ts firstKeptRun decides, by the service clock, and
 * reads refuse those runs with 404 from the same moment, whether or not the job has run yet).
 *
 * One BullMQ job scheduler per tenant with such a board (queue `laurel-runs-<tenant>`), ticking
 * every `tickEveryMs` of wall time; with the manual clock, moving the clock runs it at once.
 * A tick costs one HGET per board ({t}:runs-deleted, the first run not deleted yet) until a run
 * is due. Then, for a board without breakdown, each due run's set is read in pages per shard:
 * its members name the users with a rank history in the run, and the set and the histories are
 * UNLINKed (O(participants)). A breakdown board's run lists its groups per shard ({t:s}:lg, kept
 * by the event scripts), and each group's set goes the same way. Runs stored before a version
 * that keeps those lists (before {t}:run-groups-from's run for the board) are found by one SCAN
 * pass over the keyspace instead (O(keys of the database)), once.
 */
export const RUNS_QUEUE = "laurel-runs";
const SCHEDULER = "retention";
const SCAN_COUNT = 1000;

/** The run of a board's run key ({t:s}:lb:<board>:<run>[:<group>]), group list ({t:s}:lg:<board>:<run>) or rank history ({t:s}:lh:<board>:<run>:<user>). */
function runOfKey(key: string, boardKey: string): number | null {
  const tag = key.indexOf("}:");
  if (tag < 0) return null;
  const rest = key.slice(tag + 2);
  for (const kind of ["lb:", "lg:", "lh:"]) {
    const head = `${kind}${boardKey}:`;
    if (!rest.startsWith(head)) continue;
    const digits = /^\d+/.exec(rest.slice(head.length));
    const after = digits ? rest.charAt(head.length + digits[0].length) : "x";
    if (digits && (after === "" || after === ":")) return Number(digits[0]);
  }
  return null;
}

/** Deletes the stored runs of `board` before its first kept run at `now`; returns how many keys went. */
export async function deleteOldRuns(store: TenantStore, board: CompiledLeaderboard, now: number): Promise<number> {
  const first = firstKeptRun(board, now);
  const progress = store.keys.runsDeleted();
  const from = Number((await store.redis.hget(progress, board.key)) ?? 0);
  if (first <= from) return 0;
  let deleted = 0;
  if (board.breakdownAttribute === null) {
    for (let run = from; run < first; run++) {
      const keys = boardKeys(store, board, run, "");
      for (let shard = 0; shard < keys.length; shard++) deleted += await deleteRunSet(store, board, run, shard, keys[shard]!);
      // The run's counters (only boards without breakdown keep thresholds: src/store/thresholds.ts).
      deleted += await store.redis.unlink(store.keys.boardCounters(board.key, run));
    }
  } else {
    const listedFrom = await store.redis.hget(store.keys.runGroupsFrom(), board.key);
    // Without the mark (a store no start of this version has opened), every run is unlisted.
    const listed = listedFrom === null ? first : Math.max(from, Math.min(first, Number(listedFrom)));
    if (from < listed) deleted += await scanAndDelete(store, board, listed);
    for (let run = listed; run < first; run++) {
      for (let shard = 0; shard < store.tenant.shards; shard++) deleted += await deleteRunGroups(store, board, run, shard);
    }
  }
  await store.redis.hset(progress, board.key, first);
  return deleted;
}

const PAGE = 1000;

/** One shard's set of a run (`key`) and the rank histories of its members. */
async function deleteRunSet(store: TenantStore, board: CompiledLeaderboard, run: number, shard: number, key: string): Promise<number> {
  let deleted = 0;
  // A finished run's set no longer changes, so pages by position are stable.
  for (let start = 0; ; start += PAGE) {
    const members = await store.redis.zrange(key, start, start + PAGE - 1);
    if (members.length > 0) deleted += await store.redis.unlink(...members.map((m) => store.keys.rankHistory(shard, board.key, run, memberUser(m))));
    if (members.length < PAGE) break;
  }
  return deleted + (await store.redis.unlink(key));
}

/** One shard's sets of a breakdown board's run, group by group as the run lists them, and the list. */
async function deleteRunGroups(store: TenantStore, board: CompiledLeaderboard, run: number, shard: number): Promise<number> {
  const list = store.keys.runGroups(shard, board.key, run);
  let deleted = 0;
  for (const group of await store.redis.smembers(list)) deleted += await deleteRunSet(store, board, run, shard, boardKeys(store, board, run, group)[shard]!);
  return deleted + (await store.redis.unlink(list));
}

/** Every key of the board's runs before `first`, found by one SCAN pass (a breakdown board's groups before they were listed). */
async function scanAndDelete(store: TenantStore, board: CompiledLeaderboard, first: number): Promise<number> {
  const redis = store.redis;
  let deleted = 0;
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", `{${store.tenant.id}:*}:l[bgh]:${board.key}:*`, "COUNT", SCAN_COUNT);
    cursor = next;
    const due = keys.filter((key) => {
      const run = runOfKey(key, board.key);
      return run !== null && run < first;
    });
    if (due.length > 0) deleted += await redis.unlink(...due);
  } while (cursor !== "0");
  return deleted;
}

const queueName = (tenantId: string): string => `${RUNS_QUEUE}-${tenantId}`;

const retainedBoards = (store: TenantStore): CompiledLeaderboard[] => store.tenant.leaderboards.filter((b) => b.keepFinishedRuns !== null);

class TenantRunQueue implements TenantJobs {
  private readonly jobs: TenantJobQueue<Record<string, never>>;

  constructor(private readonly store: TenantStore, private readonly opts: TenantJobsOptions, prefix: string) {
    this.jobs = new TenantJobQueue(queueName(store.tenant.id), () => this.deleteDue(), { connection: opts.connection, prefix, logger: opts.logger, failure: "leaderboard run retention failed" });
  }

  private async deleteDue(): Promise<number> {
    const now = this.opts.clock.now();
    let deleted = 0;
    for (const board of retainedBoards(this.store)) deleted += await deleteOldRuns(this.store, board, now);
    if (deleted > 0) this.opts.logger.info({ tenant: this.store.tenant.id, keys: deleted }, "leaderboard runs past keepFinishedRuns deleted");
    return deleted;
  }

  async start(): Promise<void> {
    await this.jobs.ready();
    await this.jobs.queue.upsertJobScheduler(SCHEDULER, { every: this.opts.tickEveryMs ?? 60_000 }, { name: SCHEDULER, opts: JOB_OPTIONS });
  }

  async runNow(): Promise<void> {
    await this.jobs.run(SCHEDULER, {});
  }

  async close(): Promise<void> {
    await this.jobs.close();
  }
}

export class RunRetention extends TenantJobsSet {
  /** Starts a worker and a scheduler per tenant with a board that keeps only some runs; removes a stale one. */
  static async start(opts: TenantJobsOptions): Promise<RunRetention> {
    const prefix = jobsPrefix(opts);
    const queues: TenantRunQueue[] = [];
    for (const { store } of opts.tenants.all) {
      if (retainedBoards(store).length > 0) queues.push(new TenantRunQueue(store, opts, prefix));
      else await removeStaleScheduler(opts.redis, opts.connection, prefix, queueName(store.tenant.id), SCHEDULER);
    }
    await Promise.all(queues.map((q) => q.start()));
    return new RunRetention(queues);
  }
}
