import type { CompiledBoost, CompiledLeaderboard, CompiledSystem, CompiledTenant } from "../../config/compiled.js";
import { runEndDay, runOfDay, runStartDay } from "../../domain/leaderboards.js";

/**
 * Calendar boundaries of the config (pure): global boosts starting and finishing, leaderboard
 * runs starting and finishing. Runs are UTC windows (src/domain/leaderboards.ts), so a run's
 * `leaderboard.started` is at its first instant and `leaderboard.finished` at the first instant
 * after it: Laurel has no finalisation delay, unlike the hosted service's fixed hours (10:00 UTC
 * the day before, 13:00 UTC the day after; trophy-compat §5.8).
 */
const DAY_MS = 86_400_000;

export type ConfigBoundary =
  | { type: "points.boost_started" | "points.boost_finished"; at: number; subject: string; system: CompiledSystem; boost: CompiledBoost }
  | { type: "leaderboard.started" | "leaderboard.finished"; at: number; subject: string; board: CompiledLeaderboard; run: number };

/** At most this many boundaries of one board per call: a long downtime does not replay years of daily runs. */
const MAX_PER_BOARD = 10;

function firstRunToConsider(board: CompiledLeaderboard, from: number): number {
  const day = Math.floor(from / DAY_MS);
  if (day < board.startDay) return 0;
  if (board.endDay !== null && day >= board.endDay) return runOfDay(board, board.endDay - 1) ?? 0;
  return runOfDay(board, day) ?? 0;
}

function boardBoundaries(board: CompiledLeaderboard, from: number, to: number): ConfigBoundary[] {
  const out: ConfigBoundary[] = [];
  for (let run = firstRunToConsider(board, from), guard = 0; guard < 100_000; run++, guard++) {
    const startDay = runStartDay(board, run);
    if (startDay * DAY_MS > to || (board.endDay !== null && startDay >= board.endDay)) break;
    const subject = `${board.key}:${run}`;
    if (startDay * DAY_MS > from) out.push({ type: "leaderboard.started", at: startDay * DAY_MS, subject, board, run });
    const endDay = runEndDay(board, run);
    if (endDay !== null && endDay * DAY_MS > from && endDay * DAY_MS <= to) out.push({ type: "leaderboard.finished", at: endDay * DAY_MS, subject, board, run });
    if (board.runUnit === null) break;
  }
  return out.slice(-MAX_PER_BOARD);
}

/** Boundaries in (from, to], ascending by instant. */
export function configBoundaries(tenant: CompiledTenant, from: number, to: number): ConfigBoundary[] {
  if (to <= from) return [];
  const out: ConfigBoundary[] = [];
  for (const system of tenant.systems) {
    for (const boost of system.boosts) {
      // An empty window never runs: neither boundary.
      if (boost.end !== null && boost.end <= boost.start) continue;
      if (boost.start > from && boost.start <= to) out.push({ type: "points.boost_started", at: boost.start, subject: boost.id, system, boost });
      if (boost.end !== null && boost.end > from && boost.end <= to) out.push({ type: "points.boost_finished", at: boost.end, subject: boost.id, system, boost });
    }
  }
  for (const board of tenant.leaderboards) out.push(...boardBoundaries(board, from, to));
  return out.sort((a, b) => a.at - b.at);
}
