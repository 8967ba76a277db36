import type { CompiledLeaderboard } from "../config/compiled.js";
import { activeRun } from "../domain/leaderboards.js";
import { boardKeys, threshold } from "./leaderboard-store.js";
import type { TenantStore } from "./tenant-store.js";

/** A run's threshold as read, and the run's falls counter as it was before the read. */
interface ReadThreshold {
  value: number;
  falls: number;
}

/**
 * The threshold of each active run (the value needed to enter the full board), as the scripts
 * use it: on a full board a changed value at or below it is off the board (it was reached last,
 * behind every equal value) and the script skips counting its rank, unless the user's own entry
 * held a place before. Computing it merges every shard, so it is refreshed in the background
 * (every second, and when the manual clock moves) rather than per event; a script therefore
 * ranks with a threshold at most a second old. Two values that are not thresholds: -Infinity
 * while the board has room (or before the first refresh), so that a full board's threshold of 0
 * or below is not taken for room; NaN for a breakdown board, whose groups' thresholds are not
 * kept (the group is only known inside the script, which then counts the place exactly).
 *
 * Values can fall, and a threshold read before a fall can be above the board's real one. So each
 * threshold comes with the run's falls counter ({t}:lbf:<board>:<run>) as it was before the
 * threshold's reads: a script trusts the threshold to leave a value off the board only while the
 * counter still says so (lua/includes/leaderboards.lua fellSince). Read before, so that a fall
 * during the reads moves the counter past it.
 */
export class ThresholdCache {
  private readonly values = new Map<string, ReadThreshold>();

  constructor(private readonly store: TenantStore) {}

  get(board: CompiledLeaderboard, run: number): number {
    if (board.breakdownAttribute !== null) return NaN;
    return this.values.get(`${board.key}:${run}`)?.value ?? -Infinity;
  }

  /** The run's falls counter when its threshold was read (0 before the first refresh: a threshold of -Infinity leaves nothing off). */
  fallsSeen(board: CompiledLeaderboard, run: number): number {
    return this.values.get(`${board.key}:${run}`)?.falls ?? 0;
  }

  async refresh(now: number): Promise<void> {
    for (const board of this.store.tenant.leaderboards) {
      const run = activeRun(board, now);
      if (run === null || board.breakdownAttribute !== null) continue;
      const falls = Number((await this.store.redis.get(this.store.keys.boardFalls(board.key, run))) ?? 0);
      const value = (await threshold(this.store, board, boardKeys(this.store, board, run, ""))) ?? -Infinity;
      this.values.set(`${board.key}:${run}`, { value, falls });
    }
  }
}
