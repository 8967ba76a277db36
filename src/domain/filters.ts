import type { AttributePairs } from "../config/compiled.js";

/**
 * Attribute filters (spec: "all the event-attribute filters set on a trigger must match";
 * trophy-compat §5.5: user-attribute filters apply to any trigger). A filter matches when every
 * pair equals the attribute; an absent attribute never matches.
 *
 * Event filters are evaluated in Node (the event's attributes are in the request), and passed to
 * the script as a mask; user filters are evaluated in Lua (lua/includes/state.lua `matches`),
 * where the user's stored attributes are, and in the reference model with userFiltersMatch.
 */
export function eventFiltersMatch(pairs: AttributePairs, attributes: Readonly<Record<string, string>> | null): boolean {
  return pairs.every(([k, v]) => attributes !== null && attributes[k] === v);
}

export function userFiltersMatch(pairs: AttributePairs, userAttributes: ReadonlyMap<string, string>): boolean {
  return pairs.every(([k, v]) => userAttributes.get(k) === v);
}
