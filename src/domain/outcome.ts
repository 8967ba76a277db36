/**
 * What an event did, as the store (decoding the Lua reply) and the reference model (computing it
 * in TypeScript) both report it. The HTTP layer turns an outcome into the wire response; the
 * property tests require the two producers to agree.
 */
export interface AwardRecord {
  /** Per user and system, 1, 2, 3...; the award id derives from it. */
  seq: number;
  ms: number;
  awarded: number;
  /** The user's total in the system after this award. */
  total: number;
  triggerKey: string;
}

export interface PointsChange {
  systemKey: string;
  added: number;
  total: number;
  /** Total before the event (the level change is derived from before and total). */
  before: number;
  /** Chronological. */
  awards: AwardRecord[];
}

/** The stored streak; what a reader shows at a given moment is derived (domain/streak.ts). */
export interface StreakState {
  length: number;
  startPeriod: number | null;
  lastPeriod: number | null;
  /** Freezes held, null when the tenant has no freezes (or the user predates them). */
  freezes: number | null;
  /** Auto-earn grants credited, and the local day of first identification (freeze settlement). */
  grants?: number;
  /**
   * The local day of the last auto-earn grant credited (lua fgd): the next is `everyDays` after
   * it, so a changed `everyDays` counts from there. Null for a state written before it was kept:
   * then createdDay + grants × everyDays.
   */
  grantDay?: number | null;
  createdDay?: number | null;
  /** The period of the user's calendar that holds the instant of the user's last work (smp): coveredPeriod. */
  metPeriod?: number | null;
  /**
   * The local day the streak began (ssd; weekly and monthly tenants, else null): `started` while
   * it is in startPeriod (a streak restored from an earlier period, or begun by a process that
   * predates it, shows its first period's first day).
   */
  startDay?: number | null;
}

/** A board entry the request moved (a run's value of the user); ranks are computed by readers. */
export interface BoardChange {
  boardKey: string;
  run: number;
  oldValue: number | null;
  newValue: number;
  breakdown: string;
  /** Rank after the change (null: off the board), and the rank given at the user's previous change. */
  rank: number | null;
  previousRank: number | null;
  /** The threshold the script ranked with (the value needed to enter the full board, else 0). */
  threshold: number;
}

/**
 * One metric event as the event script (src/store/tenant-store.ts) and the reference model
 * (model.ts applyEvent) both take it: validated, values in micro-units (decimal.ts).
 */
export interface EventInput {
  metricKey: string;
  userId: string;
  now: number;
  eventId: string;
  idempotencyKey: string | null;
  valueMicro: number;
  /** Zone sent with the event, already validated; null when the event sent none. */
  tz: string | null;
  /** Profile fields sent with the event, as state-hash field/value pairs (ua:<attr> for attributes). */
  profile: [string, string][];
  /** Event attributes, already validated against the tenant's declared keys. */
  eventAttributes: Record<string, string> | null;
}

export interface ProcessedEvent {
  kind: "processed";
  eventId: string;
  totalMicro: number;
  streak: StreakState;
  extended: boolean;
  achievements: string[];
  points: PointsChange[];
  boards: BoardChange[];
}

export interface ReplayedEvent {
  kind: "replay";
  eventId: string;
  totalMicro: number;
  streak: StreakState;
}

/**
 * A call Redis had already applied when ioredis re-sent it after a dropped connection
 * (src/store/call-order.ts): the event counted once, and its changes went with the lost reply.
 */
export interface ResentEvent {
  kind: "resent";
  eventId: string;
  totalMicro: number;
  streak: StreakState;
}

export type EventOutcome = ProcessedEvent | ReplayedEvent | ResentEvent;

/**
 * "seq|ms|awarded|total|triggerKey" (lua/includes/points.lua); the trigger key may hold "|".
 * Cut at the first four bars rather than split and re-joined: every read and reply parses these.
 */
export function parseAwardRecord(text: string): AwardRecord {
  const a = text.indexOf("|");
  const b = text.indexOf("|", a + 1);
  const c = text.indexOf("|", b + 1);
  const d = text.indexOf("|", c + 1);
  return {
    seq: numberIn(text, 0, a),
    ms: numberIn(text, a + 1, b),
    awarded: numberIn(text, b + 1, c),
    total: numberIn(text, c + 1, d),
    triggerKey: text.slice(d + 1),
  };
}

/**
 * Number(text.slice(from, to)), with integers of up to 15 digits read digit by digit: a metering
 * read parses every award it shows, and Number of a slice as long as an instant in ms goes through
 * V8's runtime (~700 instructions; bench/read-cost.mjs). Anything else (a fraction, an exponent)
 * takes Number's own path.
 */
export function numberIn(text: string, from: number, to: number): number {
  const negative = text.charCodeAt(from) === 45; // "-"
  const start = negative ? from + 1 : from;
  if (to <= start || to - start > 15) return Number(text.slice(from, to));
  let value = 0;
  for (let i = start; i < to; i++) {
    const digit = text.charCodeAt(i) - 48;
    if (digit < 0 || digit > 9) return Number(text.slice(from, to));
    value = value * 10 + digit;
  }
  return negative ? -value : value;
}
