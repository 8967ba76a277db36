import type { CompiledLeaderboard } from "../config/compiled.js";
import { activeRun } from "../domain/leaderboards.js";
import { boardKeys, participants, threshold } from "./leaderboard-store.js";
import type { TenantStore } from "./tenant-store.js";

/**
 * A run's threshold as read, with the run's counters as they were just before the read and the
 * room then left; `at`: the latest time the service clock had shown once the reads were done
 * (every entry this process wrote at the cutoff reached its value by then).
 */
interface ReadThreshold {
  value: number;
  at: number;
  falls: number;
  room: number;
  added: number;
}

/**
 * The threshold of each active run (the value needed to enter the full board), as the scripts
 * use it: on a full board a changed value below it (or equal to it, reached after the read)
 * is off the board and the script skips counting its rank, unless the user's own entry held a
 * place before. Computing it merges every shard, so it is refreshed in the background
 * (every second, and when the manual clock moves) rather than per event; a script therefore
 * ranks with a threshold at most a second old. Two values that are not thresholds: -Infinity
 * while the board has room (or before the first refresh), so that a full board's threshold of 0
 * or below is not taken for room; NaN for a breakdown board, whose groups' thresholds are not
 * kept (the group is only known inside the script, which then counts the place exactly).
 *
 * Each threshold comes with the run's counters ({t}:lbc:<board>:<run>, lua/includes/
 * leaderboards.lua) as they were before the threshold's reads, so that a change during the reads
 * moves them past it:
 * - falls (`f`): values can fall, and a threshold read before a fall can be above the board's
 *   real one; a script trusts the threshold to leave a value off the board only while the
 *   counter has not moved (fellSince);
 * - entries added (`n`) and the room then left (maxParticipants less the participants): the
 *   participants now are at most those read plus the entries added since, so while that fits,
 *   the board has room and every place is on it (rankOf skips counting the equal values).
 */
export class ThresholdCache {
  private readonly values = new Map<string, ReadThreshold>();

  constructor(private readonly store: TenantStore) {}

  /**
   * Appends to `numbers` what the scripts take for the run (lua boardsOf): the threshold, the
   * falls counter, the room left and the entries counter as read, and when it was read. Before
   * the first read: -Infinity and no room known (0), which makes a script count every place; a
   * breakdown board: NaN. Appended, not returned: this runs per board on every event call.
   */
  pushNumbers(numbers: number[], board: CompiledLeaderboard, run: number): void {
    const read = board.breakdownAttribute === null ? this.values.get(`${board.key}:${run}`) : undefined;
    if (read) numbers.push(read.value, read.falls, read.room, read.added, read.at);
    else numbers.push(board.breakdownAttribute === null ? -Infinity : NaN, 0, 0, 0, 0);
  }

  /** `highest`: the clock's latest time (Clock.highest), taken after each board's reads. */
  async refresh(now: number, highest: () => number): Promise<void> {
    for (const board of this.store.tenant.leaderboards) {
      const run = activeRun(board, now);
      if (run === null || board.breakdownAttribute !== null) continue;
      const [falls, added] = await this.store.redis.hmget(this.store.keys.boardCounters(board.key, run), "f", "n");
      const keys = boardKeys(this.store, board, run, "");
      const count = await participants(this.store, keys);
      const value = (await threshold(this.store, board, keys, count)) ?? -Infinity;
      this.values.set(`${board.key}:${run}`, { value, at: highest(), falls: Number(falls ?? 0), room: board.maxParticipants - count, added: Number(added ?? 0) });
    }
  }
}
