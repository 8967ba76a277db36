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
 * id>" → "<start> <end>" and "b:<board>" → "<end> <announced up to>" (below), "-" for none;
 * entries of boosts and boards taken out of the file are kept), so that comparing the file it
 * runs with against the snapshot and the cursor (the last tick) tells, for each boundary an edit
 * moved:
 *
 *  - not announced yet (its old instant after the cursor, or none) and now at or before the
 *    cursor: due at once (`late`), since the window (cursor, now] never holds it;
 *  - announced (its old instant at or before the cursor, or recorded): the instant it was
 *    announced at is recorded (`moved`: "s:<type>|<subject>", kept from the first move on); moved
 *    later than that instant, it is announced again at its new instant under an id of its own
 *    (`movedEventSubject`), at once if that is past too; at or before that instant, not again
 *    (an announcement is never made twice, nor after a move earlier and back).
 *
 * A board's `end` is its only edit-prone boundary once it has users (start and schedule are
 * fixed then): it moves the finish of the run that held the day before it; moved later, it also
 * brings back the runs after the old end, whose boundaries up to the cursor are late unless they
 * were announced before (a board's field keeps, after its end, the instant up to which its
 * boundaries were announced: the highest cursor seen before an edit, short of the end then, so
 * an end moved earlier and back does not announce its runs twice). A board or a boost new to
 * the snapshot has no old instants: a boost's are taken as none (a boost added with its start in
 * the past is announced started), a board's boundaries before the cursor are history, as at the
 * first start. Without a snapshot (the first tick of a version that keeps one) nothing is late.
 */
export interface EditedBoundaries {
  late: ConfigBoundary[];
  /** "<type>|<subject>" → the instant it was announced at, for boundaries announced and then moved (records to set: "s:" fields). */
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

/** `previous`: the fields of {t}:wh:bounds ("s:" records included), null before the first snapshot. */
export function editedBoundaries(tenant: CompiledTenant, previous: Map<string, string> | null, cursor: number): EditedBoundaries {
  const snapshot = new Map([...(previous ?? [])].filter(([f]) => !f.startsWith("s:")));
  const late: ConfigBoundary[] = [];
  const moved = new Map<string, number>();
  /** One boundary from `from` to `to` (NONE: none); `make` builds it at its new instant. */
  const compare = (key: string, from: number, to: number, make: () => ConfigBoundary | null): void => {
    if (from === to) return;
    // The instant it was last announced at: recorded, or where it was at or before the last tick.
    const sent = previous?.get(`s:${key}`);
    const announced = sent !== undefined ? Number(sent) : from <= cursor ? from : NONE;
    if (announced !== NONE && sent === undefined) moved.set(key, announced);
    if (to <= cursor && (announced === NONE || to > announced)) {
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
    const old = snapshot.get(field)?.split(" ");
    if (previous === null || old === undefined) {
      snapshot.set(field, `${instant(end)} ${Math.min(cursor, end - 1)}`);
      continue;
    }
    const oldEnd = parseInstant(old[0]);
    if (oldEnd === end) continue;
    // Every boundary of the board up to `announced` was announced (or is history): the highest
    // cursor seen before an edit, short of the end then (the run that would start at the end does not).
    const announced = Math.max(Number(old[1] ?? "-Infinity"), Math.min(cursor, oldEnd - 1));
    snapshot.set(field, `${instant(end)} ${announced}`);
    const before: CompiledLeaderboard = { ...board, endDay: oldEnd === NONE ? null : oldEnd / DAY_MS };
    // The run whose finish the edit moves: the last one under the earlier of the two ends.
    const earlier = end < oldEnd ? board : before;
    const run = runOfDay(earlier, earlier.endDay! - 1);
    if (run !== null) {
      const finish = (b: CompiledLeaderboard): number => {
        const day = runEndDay(b, run);
        return day === null ? NONE : day * DAY_MS;
      };
      const subject = `${board.key}:${run}`;
      const at = finish(board);
      compare(boundaryKey("leaderboard.finished", subject), finish(before), at, () => ({ type: "leaderboard.finished", at, subject, board, run }));
    }
    // An end moved later brings back the runs after the old one: those of their boundaries up to
    // the cursor were never announced (at most the last 10, as after a long downtime).
    if (end > oldEnd) late.push(...boardBoundaries(board, announced, cursor).filter((b) => !(b.type === "leaderboard.finished" && b.run === run)));
  }
  return { late: late.sort((a, b) => a.at - b.at), moved, snapshot };
}

/** The subject a boundary announced again after an edit moved it is identified by (its event id): its own plus the new instant. */
export const movedEventSubject = (subject: string, at: number): string => `${subject}@${at}`;
