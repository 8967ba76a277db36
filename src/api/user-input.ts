import type { tags } from "typia";
import { fail } from "../domain/errors.js";
import { zoneName } from "../domain/periods.js";
import { userAttributeField } from "../store/fields.js";
import { clip, isCleanText, uncleanPart } from "./body.js";

/**
 * The user as sent with an event, an identification or a completion (trophy-compat §3.1
 * UpsertedUser). Optional fields may be absent or null; null means "not sent" (the SDK sends
 * null for an optional field the caller set to undefined), never "clear the stored value".
 */
export interface UserInput {
  id: string;
  email?: (string & tags.MaxLength<320>) | null;
  name?: (string & tags.MaxLength<200>) | null;
  tz?: (string & tags.MaxLength<64>) | null;
  deviceTokens?: ((string & tags.MinLength<1> & tags.MaxLength<512>)[] & tags.MaxItems<100>) | null;
  subscribeToEmails?: boolean | null;
  attributes?: Record<string, string> | null;
}

export const MAX_USER_ID_LENGTH = 255;

/**
 * Ids appear in URLs and Redis keys: 1-255 characters (code points: an emoji is one, though
 * JavaScript counts it as two units), no control characters, valid Unicode.
 */
export function checkUserId(id: string, where = "user.id"): void {
  if (id.length === 0 || (id.length > MAX_USER_ID_LENGTH && codePoints(id) > MAX_USER_ID_LENGTH) || !isCleanText(id) || id.trim() !== id) {
    fail("INVALID_BODY", `${where} must be 1-${MAX_USER_ID_LENGTH} characters without control characters or surrounding spaces`);
  }
}

/** Code points in a string: its UTF-16 units less one per low surrogate (each ends a pair, or is refused as lone). */
function codePoints(text: string): number {
  let n = text.length;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xdc00 && unit <= 0xdfff) n--;
  }
  return n;
}

const EMAIL = /^[^\s@]+@[^\s@]+$/;

/**
 * Where a request holds the user, as its messages name the fields: an event's or a completion's
 * `user` object, or the users routes' body itself (whose schema errors already said `body.name`,
 * where these said `user.name`). The paths are constants: the event route builds none.
 */
export type UserWhere = "user" | "body";
const ID_PATH: Record<UserWhere, string> = { user: "user.id", body: "body.id" };
const ATTRIBUTES_PATH: Record<UserWhere, string> = { user: "user.attributes", body: "body.attributes" };

/**
 * Semantic checks and the state-hash fields the upsert writes (lua/event-2.lua ARGV[7]).
 * `declaredAttributes` are the user attribute keys the tenant declares; any other key is refused
 * with the message trophy-compat §5.2 shows.
 */
export function userProfileFields(user: UserInput, declaredAttributes: ReadonlySet<string>, where: UserWhere = "user"): [string, string][] {
  checkUserId(user.id, ID_PATH[where]);
  const fields: [string, string][] = [];
  if (user.email != null) {
    if (!EMAIL.test(user.email) || !isCleanText(user.email)) fail("INVALID_VALUE", `${where}.email is not an email address`);
  }
  // trophy-compat §5.3 and §3.1: opting in needs an email (sent with it: the request is checked
  // on its own, before any state is read), and with subscribeToEmails false the email is not
  // stored: the one sent is dropped and a stored one cleared (an empty field reads as null).
  if (user.subscribeToEmails === true && user.email == null) fail("INVALID_VALUE", `${where}.email is required when subscribeToEmails is true`);
  if (user.subscribeToEmails === false) fields.push(["em", ""]);
  else if (user.email != null) fields.push(["em", user.email]);
  if (user.name != null) {
    if (!isCleanText(user.name)) fail("INVALID_VALUE", `${where}.name contains ${uncleanPart(user.name)}`);
    fields.push(["nm", user.name]);
  }
  if (user.tz != null) {
    const tz = zoneName(user.tz);
    if (tz === null) fail("INVALID_TIMEZONE", `Unknown IANA time zone: ${JSON.stringify(user.tz)}`);
    fields.push(["tz", tz]);
  }
  if (user.subscribeToEmails != null) fields.push(["se", user.subscribeToEmails ? "1" : "0"]);
  if (user.deviceTokens != null) {
    const unclean = user.deviceTokens.find((token) => !isCleanText(token));
    if (unclean !== undefined) fail("INVALID_VALUE", `${where}.deviceTokens contains ${uncleanPart(unclean)}`);
    // A set, as a device is registered once: repeats kept once, in the order first sent.
    fields.push(["dt", JSON.stringify([...new Set(user.deviceTokens)])]);
  }
  const attributes = checkAttributes(user.attributes ?? null, declaredAttributes, ATTRIBUTES_PATH[where]);
  if (attributes !== null) for (const [k, v] of Object.entries(attributes)) fields.push([userAttributeField(k), v]);
  return fields;
}

/** The zone a request's profile fields carry (userProfileFields: IANA's spelling), or null. */
export function profileZone(fields: readonly [string, string][]): string | null {
  for (const [field, value] of fields) if (field === "tz") return value;
  return null;
}

// An unknown key is named in the 422, but a body may hold thousands, and keys of any length.
const NAMED_KEYS = 10;
const NAMED_KEY_LENGTH = 64;

/**
 * The 422 for attribute keys the tenant does not declare (trophy-compat §5.2: "Invalid attribute
 * keys: ..."): the first ten named (each cut to 64 characters), the others counted. A body's key
 * may hold a lone surrogate (JSON escapes it): named, it is U+FFFD, or the message reached the
 * wire as `\ud800`, which strict JSON parsers (serde_json) refuse.
 */
export function failUnknownAttributes(unknown: readonly string[]): never {
  const named = unknown.slice(0, NAMED_KEYS).map((key) => {
    const k = key.toWellFormed();
    // The empty key is named as such: "Invalid attribute keys: " named nothing.
    if (k === "") return '""';
    return k.length > NAMED_KEY_LENGTH ? `${clip(k, NAMED_KEY_LENGTH)}…` : k;
  });
  const more = unknown.length > NAMED_KEYS ? ` and ${unknown.length - NAMED_KEYS} more` : "";
  return fail("INVALID_ATTRIBUTES", `Invalid attribute keys: ${named.join(", ")}${more}`);
}

/**
 * Custom attributes must be declared in the tenant file (trophy-compat §5.2: "Invalid attribute
 * keys: ..."); values are strings of at most 1000 characters without control characters.
 */
export function checkAttributes(
  attributes: Record<string, string> | null,
  declared: ReadonlySet<string>,
  where: string,
): Record<string, string> | null {
  if (attributes === null) return null;
  const unknown = Object.keys(attributes).filter((k) => !declared.has(k));
  if (unknown.length > 0) failUnknownAttributes(unknown);
  for (const [k, v] of Object.entries(attributes)) {
    if (v.length > 1000 || !isCleanText(v)) fail("INVALID_VALUE", `${where}.${k} must be at most 1000 characters without control characters`);
  }
  return attributes;
}
