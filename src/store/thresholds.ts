import type { CompiledLeaderboard } from "../config/compiled.js";
import { activeRun } from "../domain/leaderboards.js";
import { boardKeys, threshold } from "./leaderboard-store.js";
import type { TenantStore } from "./tenant-store.js";

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
 */
export class ThresholdCache {
  private readonly values = new Map<string, number>();

  constructor(private readonly store: TenantStore) {}

  get(board: CompiledLeaderboard, run: number): number {
    if (board.breakdownAttribute !== null) return NaN;
    return this.values.get(`${board.key}:${run}`) ?? -Infinity;
  }

  async refresh(now: number): Promise<void> {
    for (const board of this.store.tenant.leaderboards) {
      const run = activeRun(board, now);
      if (run === null || board.breakdownAttribute !== null) continue;
      this.values.set(`${board.key}:${run}`, (await threshold(this.store, board, boardKeys(this.store, board, run, ""))) ?? -Infinity);
    }
  }
}
