/**
 * Field names of the user state hash ({t:s}:u:<user>). Short, fixed nouns: a user hash is read
 * and written on every event, and every byte of a field name is stored once per user.
 *
 *   ct, up            created and updated, ms; cd the local day index of creation
 *   np                notification preferences (JSON, snake_case wire keys)
 *   em, nm, tz        email, name, IANA zone
 *   se                subscribeToEmails ("1"/"0"), dt deviceTokens (JSON array)
 *   ua:<attr>         custom user attribute
 *   m:<metric>        metric total, micro-units
 *   p:<sys>, pn:<sys> points total; number of awards ever made (award sequence)
 *   hw:<sys>.<trig>   high-water count a metric trigger has paid up to
 *   tc:<sys>.<trig>   a filtered metric trigger's own count (values of events that passed)
 *   bo:<sys>          the user's own boosts: "id,multiplier,start,end,rounding;..."
 *   a:<ach>           achievement completion time, ms
 *   sl, ss, sp        streak length, first period, last extended period
 *   sq, sv:<metric>   period being accumulated, and each streak metric's value in it
 *   sb                longest streak ever
 *   fz, fg            streak freezes held; auto-earn grants credited so far
 *   i:<metric>:<key>  idempotency key → event id (spec: infinite window)
 */
export const PROFILE_FIELDS = ["ct", "up", "cd", "tz", "em", "nm", "se", "dt"] as const;

export const userAttributeField = (key: string): string => `ua:${key}`;

export const idempotencyField = (metricKey: string, key: string): string => `i:${metricKey}:${key}`;
