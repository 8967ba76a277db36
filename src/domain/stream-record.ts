/**
 * The record every state-changing script appends to its shard's stream ({t:s}:x), in the same
 * atomic call as the change: the single source for what is materialised later (daily buckets,
 * outbound events). Fields:
 *   k  kind: "ev" (metric event)
 *   u  user id
 *   t  the service time of the change, ms
 *   z  the user's zone at the time
 *   e  kind detail; for "ev": "<metric>|<value micro>|<eventId>"
 *   o  outcome parts, ";"-separated:
 *        c                                  the user was created
 *        a:<achievement>                    achievement completed
 *        p:<sys>:<added>:<total>:<lvBefore>:<lvAfter>   points changed (level indexes, 0 = none)
 *        s:<length>                         streak extended to length
 */
export interface StreamPointsPart {
  systemKey: string;
  added: number;
  total: number;
  levelBefore: number;
  levelAfter: number;
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
  };
  for (const part of (fields.o ?? "").split(";")) {
    if (part === "c") record.created = true;
    else if (part.startsWith("a:")) record.achievements.push(part.slice(2));
    else if (part.startsWith("s:")) record.streakLength = Number(part.slice(2));
    else if (part.startsWith("p:")) {
      // System keys cannot contain ":" (config Key pattern), so the split is unambiguous.
      const [, systemKey, added, total, before, after] = part.split(":");
      record.points.push({ systemKey: systemKey!, added: Number(added), total: Number(total), levelBefore: Number(before), levelAfter: Number(after) });
    }
  }
  return record;
}

/** For kind "ev": the metric, its value in micro-units and the event id. */
export function eventDetail(record: StreamRecord): { metricKey: string; valueMicro: number; eventId: string } {
  const [metricKey, value, eventId] = record.detail.split("|");
  return { metricKey: metricKey!, valueMicro: Number(value), eventId: eventId! };
}
