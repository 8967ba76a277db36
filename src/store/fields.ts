/**
 * Field names of the user state hash ({t:s}:u:<user>). Short, fixed nouns: a user hash is read
 * and written on every event, and every byte of a field name is stored once per user.
 *
 *   ct, up            created and updated, ms
 *   em, nm, tz        email, name, IANA zone
 *   se                subscribeToEmails ("1"/"0"), dt deviceTokens (JSON array)
 *   ua:<attr>         custom user attribute
 *   m:<metric>        metric total, micro-units
 *   p:<sys>, pn:<sys> points total; number of awards ever made (award sequence)
 *   hw:<sys>.<trig>   high-water metric total a metric trigger has paid up to
 *   a:<ach>           achievement completion time, ms
 *   sl, ss, sp        streak length, first period, last extended period
 *   sq, sv:<metric>   period being accumulated, and each streak metric's value in it
 *   sb                longest streak ever
 *   i:<metric>:<key>  idempotency key → event id (spec: infinite window)
 */
export const PROFILE_FIELDS = ["ct", "up", "tz", "em", "nm", "se", "dt"] as const;

export const idempotencyField = (metricKey: string, key: string): string => `i:${metricKey}:${key}`;
