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

/**
 * Boundaries edited in the tenant file (README: Webhooks, Time-driven events). The timeline keeps
 * a snapshot of the edit-prone instants as it last read them ({t}:wh:bounds, fields "g:<boost
 * id>" → "<start> <end>" and "b:<board>" → "<end>", "-" for none; entries of boosts and boards
 * taken out of the file are kept), so that comparing the file it runs with against the snapshot
 * and the cursor (the last tick) tells, for each boundary an edit moved:
 *
 *  - not announced yet (its old instant after the cursor, or none) and now at or before the
 *    cursor: due at once (`late`), since the window (cursor, now] never holds it;
 *  - announced (its old instant at or before the cursor) and now later, or gone: its old instant
 *    is recorded as announced (`moved`: "s:<type>|<subject>"), so that it is announced again at
 *    its new instant under an id of its own (`movedEventSubject`), and at once if that is past too;
 *  - announced and now earlier: nothing (an announcement is never made twice).
 *
 * A board's `end` is its only edit-prone boundary once it has users (start and schedule are
 * fixed then): it moves the finish of the run that held the day before it (the runs after an end
 * moved later, between the old end and the cursor, are not announced). A board or a boost new to
 * the snapshot has no old instants: a boost's are taken as none (a boost added with its start in
 * the past is announced started), a board's boundaries before the cursor are history, as at the
 * first start. Without a snapshot (the first tick of a version that keeps one) nothing is late.
 */
export interface EditedBoundaries {
  late: ConfigBoundary[];
  /** "<type>|<subject>" → the instant it was announced at, for boundaries announced and then moved later. */
  moved: Map<string, number>;
  /** The snapshot of this tenant file (fields as above). */
  snapshot: Map<string, string>;
}

const NONE = Number.POSITIVE_INFINITY;
const instant = (t: number | null): string => (t === null || t === NONE ? "-" : String(t));
const parseInstant = (s: string | undefined): number => (s === undefined || s === "-" ? NONE : Number(s));

export const boundaryKey = (type: string, subject: string): string => `${type}|${subject}`;

function boostInstants(boost: CompiledBoost): [number, number] {
  if (boost.end !== null && boost.end <= boost.start) return [NONE, NONE];
  return [boost.start, boost.end ?? NONE];
}

export function editedBoundaries(tenant: CompiledTenant, previous: Map<string, string> | null, cursor: number): EditedBoundaries {
  const snapshot = new Map(previous ?? []);
  const late: ConfigBoundary[] = [];
  const moved = new Map<string, number>();
  /** One boundary from `from` to `to` (NONE: none); `make` builds it at its new instant. */
  const compare = (key: string, from: number, to: number, make: () => ConfigBoundary | null): void => {
    if (from === to) return;
    if (from <= cursor && to > from) moved.set(key, from);
    if (to <= cursor && (from > cursor || to > from)) {
      const b = make();
      if (b) late.push(b);
    }
  };
  for (const system of tenant.systems) {
    for (const boost of system.boosts) {
      const field = `g:${boost.id}`;
      const [start, end] = boostInstants(boost);
      const old = snapshot.get(field)?.split(" ");
      snapshot.set(field, `${instant(start)} ${instant(end)}`);
      if (previous === null) continue;
      const [oldStart, oldEnd] = old ? [parseInstant(old[0]), parseInstant(old[1])] : [NONE, NONE];
      compare(boundaryKey("points.boost_started", boost.id), oldStart, start, () => ({ type: "points.boost_started", at: start, subject: boost.id, system, boost }));
      compare(boundaryKey("points.boost_finished", boost.id), oldEnd, end, () => ({ type: "points.boost_finished", at: end, subject: boost.id, system, boost }));
    }
  }
  for (const board of tenant.leaderboards) {
    const field = `b:${board.key}`;
    const end = board.endDay === null ? NONE : board.endDay * DAY_MS;
    const old = snapshot.get(field);
    snapshot.set(field, instant(end));
    if (previous === null || old === undefined) continue;
    const oldEnd = parseInstant(old);
    if (oldEnd === end) continue;
    const before: CompiledLeaderboard = { ...board, endDay: oldEnd === NONE ? null : oldEnd / DAY_MS };
    // The run whose finish the edit moves: the last one under the earlier of the two ends.
    const earlier = end < oldEnd ? board : before;
    const run = runOfDay(earlier, earlier.endDay! - 1);
    if (run === null) continue;
    const finish = (b: CompiledLeaderboard): number => {
      const day = runEndDay(b, run);
      return day === null ? NONE : day * DAY_MS;
    };
    const subject = `${board.key}:${run}`;
    const at = finish(board);
    compare(boundaryKey("leaderboard.finished", subject), finish(before), at, () => ({ type: "leaderboard.finished", at, subject, board, run }));
  }
  return { late: late.sort((a, b) => a.at - b.at), moved, snapshot };
}

/** The subject a boundary announced again after an edit moved it is identified by (its event id): its own plus the new instant. */
export const movedEventSubject = (subject: string, at: number): string => `${subject}@${at}`;
