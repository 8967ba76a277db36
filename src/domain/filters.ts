import type { AttributePairs } from "../config/compiled.js";

/*
 * Attribute filters (spec: "all the event-attribute filters set on a trigger must match";
 * trophy-compat §5.5: user-attribute filters apply to any trigger). A filter matches when every
 * pair equals the attribute; an absent attribute never matches.
 *
 * Event filters are evaluated in Node (the event's attributes are in the request), and passed to
 * the script as a mask; user filters are evaluated in Lua (lua/includes/state.lua `matches`),
 * where the user's stored attributes are, and in the reference model with userFiltersMatch.
 */

/**
 * The event script takes the event-filter results of one metric's triggers as the bits of one
 * double (exact up to 2^52): at most this many metric triggers with event-attribute filters on
 * one metric (the config compiler refuses more).
 */
export const MAX_EVENT_FILTERED_TRIGGERS = 52;

export function eventFiltersMatch(pairs: AttributePairs, attributes: Readonly<Record<string, string>> | null): boolean {
  return pairs.every(([k, v]) => attributes !== null && attributes[k] === v);
}

export function userFiltersMatch(pairs: AttributePairs, userAttributes: ReadonlyMap<string, string>): boolean {
  return pairs.every(([k, v]) => userAttributes.get(k) === v);
}
