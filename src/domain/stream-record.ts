/**
 * The record every state-changing script appends to its shard's stream ({t:s}:x), in the same
 * atomic call as the change: the single source for what is materialised later (daily buckets,
 * outbound events). Fields:
 *   k  kind: "ev" metric event, "us" identify/create/update, "ac" achievement completed by API,
 *      "tt" time trigger paid, "sa" admin streak operation, "ub" user boost added or ended (admin)
 *   u  user id
 *   t  the service time of the change, ms
 *   z  the user's zone at the time
 *   e  kind detail; "ev": "<metric>|<value micro>|<eventId>|<local day>|<its month>|<total micro after>"
 *      (records of earlier versions: without day and month, or also without the total); "us": the mode; "ac": the
 *      achievement; "tt": the trigger key; "sa": "freeze" or "restore"; "ub": "<op>|<sys>|<boost id>|<start>|<end>"
 *      (op "add" or "end"; the boost's window after the change in ms, end '' when open; an ended
 *      scheduled boost has an empty window, end = start). A "ub" record has no outcome parts.
 *   o  outcome parts, ";"-separated:
 *        c                                  the user was created
 *        a:<achievement>                    achievement completed
 *        p:<sys>:<added>:<total>:<lvBefore>:<lvAfter>:<lastAward>   points changed (level
 *                                           indexes, 0 = none; the number of the change's last
 *                                           award, absent in records of earlier versions)
 *        s:<length>                         streak extended to length
 *        sl:<length>                        streak of that length lost
 *        fc:<n>, fe:<n>, fa:<n>             freezes consumed, auto-earned, granted by an admin
 *        sr:<length>                        streak restored to length by an admin
 */
export interface StreamPointsPart {
  systemKey: string;
  added: number;
  total: number;
  levelBefore: number;
  levelAfter: number;
  /** The number (seq) of the change's last award, the part's last field; null in records written before it. */
  lastAward: number | null;
}

export interface StreamRecord {
  id: string;
  kind: string;
  userId: string;
  ms: number;
  tz: string;
  detail: string;
  created: boolean;
  achievements: string[];
  points: StreamPointsPart[];
  streakLength: number | null;
  streakLost: number | null;
  freezesConsumed: number;
  freezesEarned: number;
  freezesGranted: number;
  streakRestored: number | null;
}

/** Decodes one stream entry as ioredis returns it: [id, [field, value, field, value...]]. */
export function decodeStreamRecord(id: string, flat: string[]): StreamRecord {
  const fields: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i]!] = flat[i + 1]!;
  const record: StreamRecord = {
    id,
    kind: fields.k ?? "",
    userId: fields.u ?? "",
    ms: Number(fields.t),
    tz: fields.z ?? "UTC",
    detail: fields.e ?? "",
    created: false,
    achievements: [],
    points: [],
    streakLength: null,
    streakLost: null,
    freezesConsumed: 0,
    freezesEarned: 0,
    freezesGranted: 0,
    streakRestored: null,
  };
  for (const part of (fields.o ?? "").split(";")) {
    if (part === "c") record.created = true;
    else if (part.startsWith("a:")) record.achievements.push(part.slice(2));
    else if (part.startsWith("s:")) record.streakLength = Number(part.slice(2));
    else if (part.startsWith("sl:")) record.streakLost = Number(part.slice(3));
    else if (part.startsWith("sr:")) record.streakRestored = Number(part.slice(3));
    else if (part.startsWith("fc:")) record.freezesConsumed = Number(part.slice(3));
    else if (part.startsWith("fe:")) record.freezesEarned = Number(part.slice(3));
    else if (part.startsWith("fa:")) record.freezesGranted = Number(part.slice(3));
    else if (part.startsWith("p:")) {
      // System keys cannot contain ":" (config Key pattern), so the split is unambiguous.
      const [, systemKey, added, total, before, after, lastAward] = part.split(":");
      record.points.push({ systemKey: systemKey!, added: Number(added), total: Number(total), levelBefore: Number(before), levelAfter: Number(after), lastAward: lastAward === undefined ? null : Number(lastAward) });
    }
  }
  return record;
}

/** For kind "ev": the metric, its value in micro-units, the event id, and the total after it when the record carries it. */
export function eventDetail(record: StreamRecord): { metricKey: string; valueMicro: number; eventId: string; totalMicro: number | null } {
  const parts = record.detail.split("|");
  const total = parts.length >= 4 ? parts.at(-1) : undefined;
  return { metricKey: parts[0]!, valueMicro: Number(parts[1]), eventId: parts[2]!, totalMicro: total === undefined ? null : Number(total) };
}

/** For kind "ub" (lua/userBoost-3.lua): the boost and its window after the change. */
export interface BoostDetail {
  op: "add" | "end";
  systemKey: string;
  boostId: string;
  start: number;
  end: number | null;
}

export function boostDetail(record: StreamRecord): BoostDetail {
  const [op, systemKey, boostId, start, end] = record.detail.split("|");
  return { op: op === "end" ? "end" : "add", systemKey: systemKey!, boostId: boostId!, start: Number(start), end: end === undefined || end === "" ? null : Number(end) };
}
