/**
 * The user state hash ({t:s}:u:<user>). Short, fixed nouns: a user hash is read and written on
 * every event, and every byte of a field name is stored once per user.
 *
 * Hash fields:
 *   s                 the hot state: one msgpack array, each name below at its position in the
 *                     tenant's registry (src/store/state-slots.ts; lua/includes/state.lua says why)
 *   tz, em, nm        IANA zone, email, name
 *   se, dt            subscribeToEmails ("1"/"0"), deviceTokens (JSON array)
 *   ua:<attr>         custom user attribute
 *   np                notification preferences (JSON, snake_case wire keys)
 *   i:<metric>:<key>  idempotency key → event id (spec: infinite window)
 *
 * Names of the `s` positions (values are numbers unless noted; false when absent):
 *   ct, up            created and updated, ms; cd the local day index of creation
 *   m:<metric>        metric total, micro-units
 *   p:<sys>, pn:<sys> points total; number of awards ever made (award sequence)
 *   hw:<sys>.<trig>   high-water count a metric trigger has paid up to
 *   tc:<sys>.<trig>   a filtered metric trigger's own count (values of events that passed)
 *   bo:<sys>          (string) the user's own boosts: "id,multiplier,start,end,rounding;..."
 *   a:<ach>           achievement completion time, ms
 *   sl, ss, sp        streak length (0 once lost), first period, last period extended or frozen
 *   sq, sv:<metric>   period being accumulated, and each streak metric's value in it
 *   sb                longest streak ever; sxt when the streak was last extended, ms
 *   sm, smp           the instant (ms) of the user's last work (the first meeting of the streak
 *                     threshold in a period, and each time its values reach a new number of full
 *                     thresholds),
 *                     and the period of the user's calendar that holds it (a zone change maps it:
 *                     lua/includes/state.lua lastCovered, moveCalendar)
 *   sqa, sqk          the instant (ms) of the first value of the period `sq` accumulates, and the
 *                     most full thresholds its values have reached (lua/includes/streak.lua)
 *   lb:<board>        the user's entry of the board's latest run: its run; lbv:<board> the value,
 *                     lbm:<board> (string) the zset member, lbk:<board> (string) the breakdown group,
 *                     lbr:<board> the rank given at that change (a state of an earlier version holds
 *                     the table {run, value, reachedAt, breakdown, rank} at lb:<board>)
 *   fz, fg            streak freezes held; auto-earn grants credited so far
 *   fgd               the local day of the last auto-earn grant (tenants with autoEarn)
 *   pd                the digest of the last profile an event applied (lua/event-2.lua ARGV[7])
 *   _x                (map) names found in a state of the earlier map layout that no config registered
 */
export const PROFILE_FIELDS = ["tz", "em", "nm", "se", "dt"] as const;

export const userAttributeField = (key: string): string => `ua:${key}`;

export const idempotencyField = (metricKey: string, key: string): string => `i:${metricKey}:${key}`;

/**
 * The `s` names of a user's entry in a board's latest run, in the order lua/includes/leaderboards.lua
 * resolves them: run, value, zset member, breakdown group, rank given.
 */
export const boardStateNames = (boardKey: string): [run: string, value: string, member: string, breakdown: string, rank: string] => [
  `lb:${boardKey}`,
  `lbv:${boardKey}`,
  `lbm:${boardKey}`,
  `lbk:${boardKey}`,
  `lbr:${boardKey}`,
];
