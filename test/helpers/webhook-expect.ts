import type { CompiledLeaderboard, CompiledTenant } from "../../src/config/compiled.js";
import { achievementJson, awardJson, iso, levelJson, systemHeadJson } from "../../src/api/wire.js";
import { boardJson } from "../../src/api/leaderboards.js";
import { globalBoostJson, userBoostJson, type UserBoostRecord } from "../../src/api/boosts.js";
import { fromMicro } from "../../src/domain/decimal.js";
import { memberUser, runEndDay, runStartDay } from "../../src/domain/leaderboards.js";
import { levelIndex } from "../../src/domain/levels.js";
import { modelBoardOrder, modelRank, streakState, type ModelChange, type ModelState } from "../../src/domain/model.js";
import { formatDay } from "../../src/domain/periods.js";
import { viewStreak } from "../../src/domain/streak.js";
import { coalescedEventId } from "../../src/jobs/webhooks/kinds.js";

/**
 * The outbound events the reference model says a change or a stretch of the clock sends
 * (README: Webhooks, "Event types and payloads"; trophy-compat §3.12, §5.8), without their ids:
 * derived from the model's journal (ModelState.journal: what each change did) and its state, not
 * from the service's payload code (src/jobs/webhooks/payloads.ts), so that a wrong award, level,
 * rank, streak or top 10 there disagrees. The wire helpers (awardJson, levelJson, boardJson...)
 * only lay out objects the model decides.
 *
 * What a payload reads besides the change itself (the user, the freezes held, the streak's first
 * day) is read when the consumer builds the event: the caller builds the expectations right after
 * the records were drained, from the model's state then and the user as GET /v1/users/{id} shows it.
 */
export interface ExpectedHook {
  type: string;
  timestamp: string;
  [field: string]: unknown;
}

const unit = (board: CompiledLeaderboard, value: number) => (board.rankBy === "metric" ? fromMicro(value) : value);

/** The events of one change of a user (one stream record): `user`, the User object when the event was built. */
export function changeHooks(tenant: CompiledTenant, model: ModelState, change: ModelChange, user: unknown): ExpectedHook[] {
  const head = (type: string) => ({ type, timestamp: iso(change.ms), user });
  const out: ExpectedHook[] = [];
  for (const key of change.completed) out.push({ ...head("achievement.completed"), achievement: achievementJson(tenant, tenant.achievementByKey.get(key)!, change.ms) });
  for (const p of change.points) {
    const system = tenant.systemByKey.get(p.systemKey)!;
    const before = levelIndex(system.levels, p.before);
    const after = levelIndex(system.levels, p.total);
    const level = (i: number) => (i === 0 ? null : levelJson(system.levels[i - 1]!));
    if (p.added !== 0) {
      out.push({
        ...head("points.changed"),
        points: { ...systemHeadJson(system), total: p.total, added: p.added, awards: p.awards.map((a) => awardJson(tenant, system, change.userId, a)), level: level(after) },
      });
    }
    if (before !== after) out.push({ ...head("points.level_changed"), points: { ...systemHeadJson(system), total: p.total }, previousLevel: level(before), newLevel: level(after) });
  }
  const modelUser = model.users.get(change.userId)!;
  const freezes = modelUser.streak.freezes ?? 0;
  if (change.lost > 0) out.push({ ...head("streak.lost"), length: change.lost });
  if (change.consumed > 0) out.push({ ...head("streak.freeze_consumed"), consumed: change.consumed, freezes });
  // Auto-earned and admin-granted freezes are two events (two subjects) when one record has both.
  if (change.earned > 0) out.push({ ...head("streak.freeze_earned"), earned: change.earned, freezes });
  if (change.granted > 0) out.push({ ...head("streak.freeze_earned"), earned: change.granted, freezes });
  if (change.extended !== null) {
    const streak = viewStreak(tenant.streak, { ...streakState(modelUser), length: change.extended, lastPeriod: change.period }, change.day, change.period);
    if (change.extended === 1) out.push({ ...head("streak.started"), streak });
    out.push({ ...head("streak.extended"), streak });
  }
  for (const b of change.boards) {
    if (b.rank === b.previousRank) continue;
    const board = tenant.leaderboardByKey.get(b.boardKey)!;
    const left = board.rankBy === "streak" && b.newValue === 0;
    out.push({
      ...head("leaderboard.rank_changed"),
      leaderboard: {
        ...boardJson(tenant, board),
        status: "active",
        run: formatDay(runStartDay(board, b.run)),
        rank: b.rank,
        value: left ? null : unit(board, b.newValue),
        previousRank: b.previousRank,
        previousValue: b.oldValue === null ? null : unit(board, b.oldValue),
        breakdownAttributeValue: b.breakdown === "" ? null : b.breakdown,
      },
    });
  }
  return out;
}

const DAY_MS = 86_400_000;

/**
 * The calendar events of the config in (from, to] (README: Time-driven events): each run's
 * leaderboard.started at its first instant (rankings []), leaderboard.finished at the first
 * instant after it with the run's top 10 as the model holds it (a breakdown board: []), and the
 * global boosts' starts and ends. The caller keeps each stretch to at most 10 boundaries a board
 * (a longer one replays only the last 10).
 */
export function calendarHooks(tenant: CompiledTenant, model: ModelState, from: number, to: number): ExpectedHook[] {
  const out: ExpectedHook[] = [];
  const within = (at: number) => at > from && at <= to;
  for (const board of tenant.leaderboards) {
    for (let run = 0; ; run++) {
      const startDay = runStartDay(board, run);
      if (startDay * DAY_MS > to || (board.endDay !== null && startDay >= board.endDay)) break;
      const run0 = { ...boardJson(tenant, board), run: formatDay(startDay) };
      if (within(startDay * DAY_MS)) out.push({ type: "leaderboard.started", timestamp: iso(startDay * DAY_MS), leaderboard: { ...run0, status: "active", rankings: [] } });
      const endDay = runEndDay(board, run);
      if (endDay !== null && within(endDay * DAY_MS)) {
        out.push({ type: "leaderboard.finished", timestamp: iso(endDay * DAY_MS), leaderboard: { ...run0, status: "finished", rankings: board.breakdownAttribute === null ? topTen(model, board, run) : [] } });
      }
      if (board.runUnit === null) break;
    }
  }
  for (const system of tenant.systems) {
    for (const boost of system.boosts) {
      if (boost.end !== null && boost.end <= boost.start) continue;
      if (within(boost.start)) out.push({ type: "points.boost_started", timestamp: iso(boost.start), boost: { ...globalBoostJson(system, boost, boost.start), status: "active" } });
      if (boost.end !== null && within(boost.end)) out.push({ type: "points.boost_finished", timestamp: iso(boost.end), boost: { ...globalBoostJson(system, boost, boost.end), status: "finished" } });
    }
  }
  return out;
}

/** A run's first min(10, maxParticipants) entries in board order with their rank and the user's name. */
function topTen(model: ModelState, board: CompiledLeaderboard, run: number) {
  const entries = model.boards.get(`${board.key}:${run}:`) ?? new Map<string, { value: number; reachedAt: number }>();
  return modelBoardOrder(entries)
    .slice(0, Math.min(10, board.maxParticipants))
    .map((e) => {
      const userId = memberUser(e.member);
      return { userId, userName: model.users.get(userId)?.profile.get("nm") ?? null, rank: modelRank(board, entries, e.value, e.member), value: unit(board, e.value) };
    });
}

/** A user boost as the test made and ended it, with which of its boundaries were announced. */
export interface TrackedUserBoost extends UserBoostRecord {
  started: boolean;
  finished: boolean;
}

/**
 * The user boosts' boundaries due by `now` and not announced yet (README: user boosts, scheduled
 * by instant, checked against the stored boost when due): the start of a boost whose window is
 * not empty, its end (as it stands: ended early, the new end) once passed. Marks them announced.
 */
export function userBoostHooks(tenant: CompiledTenant, boosts: TrackedUserBoost[], now: number): ExpectedHook[] {
  const out: ExpectedHook[] = [];
  for (const b of boosts) {
    const live = b.end === null || b.end > b.start;
    const system = tenant.systemByKey.get(b.pointsSystemKey)!;
    if (live && !b.started && b.start <= now) {
      b.started = true;
      out.push({ type: "points.boost_started", timestamp: iso(b.start), boost: { ...userBoostJson(system, b, b.start), status: "active" } });
    }
    if (live && !b.finished && b.end !== null && b.end <= now) {
      b.finished = true;
      out.push({ type: "points.boost_finished", timestamp: iso(b.end), boost: { ...userBoostJson(system, b, b.end), status: "finished" } });
    }
  }
  return out;
}

/** An endpoint as the test configures it: the types it subscribes to, and the window (minutes) of each coalesced one. */
export interface EndpointSubscription {
  key: string;
  events: ReadonlySet<string>;
  coalesce: ReadonlyMap<string, number>;
}

/** A delivery one endpoint should hold: the payload, and the event id when the model knows it (coalesced events). */
export interface ExpectedDelivery {
  hook: ExpectedHook;
  id: string | null;
}

interface OpenWindow {
  closes: number;
  key: string;
  /** The window's events in the order of their changes (the service orders them by stream id: per user, the order of writing). */
  hooks: ExpectedHook[];
}

const MINUTE_MS = 60_000;

/**
 * What one endpoint should receive (README: Webhooks): every event of a type it subscribes to,
 * each change apart, except the types it coalesces (README: Coalescing): of those, one event per
 * user, subject (system, or board and run) and window of N minutes of the service clock
 * ([k·N, (k+1)·N) since the epoch), due when the clock reaches the window's end. Built here
 * from the model's changes, in their own terms, not by src/jobs/webhooks/coalesce.ts's merge:
 * the last change's event with, for points.changed, `added` the total after the last change
 * less the total before the first, and for leaderboard.rank_changed the first change's
 * `previousRank`/`previousValue`.
 */
export class EndpointExpectation {
  readonly deliveries: ExpectedDelivery[] = [];
  private readonly windows = new Map<string, OpenWindow>();
  /** Windows already sent: a change in one of them (the clock set back into it) is not sent (see hold). */
  private readonly sent = new Set<string>();

  constructor(
    private readonly tenant: CompiledTenant,
    readonly endpoint: EndpointSubscription,
  ) {}

  /** The events of one change (changeHooks): each subscribed one sent, or held in its window when its type is coalesced. */
  change(change: ModelChange, hooks: readonly ExpectedHook[]): void {
    for (const hook of hooks) {
      if (!this.endpoint.events.has(hook.type)) continue;
      const minutes = this.endpoint.coalesce.get(hook.type);
      if (minutes === undefined) this.deliveries.push({ hook, id: null });
      else this.hold(change, hook, minutes * MINUTE_MS);
    }
  }

  /** Events of no change (calendar boundaries, user boosts): never coalesced. */
  timeline(hooks: readonly ExpectedHook[]): void {
    for (const hook of hooks) if (this.endpoint.events.has(hook.type)) this.deliveries.push({ hook, id: null });
  }

  /** The windows the clock has closed by `now`: one event each, under the id of its endpoint, type, user, subject and window. */
  closeWindows(now: number): void {
    for (const [key, w] of this.windows) {
      if (w.closes > now) continue;
      this.windows.delete(key);
      this.sent.add(key);
      this.deliveries.push({ hook: mergedHook(w.hooks), id: coalescedEventId(this.tenant.ns, this.tenant.id, w.key) });
    }
  }

  private hold(change: ModelChange, hook: ExpectedHook, windowMs: number): void {
    const window = Math.floor(change.ms / windowMs);
    const key = [this.endpoint.key, hook.type, change.userId, coalesceSubject(change, hook), window].join("|");
    // README, Coalescing: a change reaching a window after it was sent queues the window's event id
    // again, which the delivery queue ignores while it keeps the first (a change made after the
    // manual clock was set back into the window is one).
    if (this.sent.has(key)) return;
    const open = this.windows.get(key) ?? { closes: (window + 1) * windowMs, key, hooks: [] };
    open.hooks.push(hook);
    this.windows.set(key, open);
  }
}

/** The subject a coalesced event is kept per: the points system, or the board and run (the run's number, as the event ids name it). */
function coalesceSubject(change: ModelChange, hook: ExpectedHook): string {
  if (hook.type === "points.changed") return (hook.points as { key: string }).key;
  const boardKey = (hook.leaderboard as { key: string }).key;
  const part = change.boards.find((b) => b.boardKey === boardKey)!;
  return `${boardKey}:${part.run}`;
}

/** A window's one event: the last change's, with what README says spans the window. */
function mergedHook(hooks: readonly ExpectedHook[]): ExpectedHook {
  const first = hooks[0]!;
  const last = hooks.at(-1)!;
  if (last.type === "points.changed") {
    // README, Coalescing: the total after the window's last change less the total before its
    // first. The sum of the window's changes but for a clock set back between them: a change made
    // meanwhile in another window (an earlier one) moved the total too.
    const a = first.points as { total: number; added: number };
    const added = (last.points as { total: number }).total - (a.total - a.added);
    return { ...last, points: { ...(last.points as object), added } };
  }
  const { previousRank, previousValue } = first.leaderboard as { previousRank: unknown; previousValue: unknown };
  return { ...last, leaderboard: { ...(last.leaderboard as object), previousRank, previousValue } };
}

/** JSON with every object's keys sorted: a canonical text to order and compare payloads by. */
export function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === "object" && !Array.isArray(v) ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v,
  );
}
