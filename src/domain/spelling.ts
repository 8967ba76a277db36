/**
 * Misspelt keys, for error messages only: a required field missing beside a key spelt almost
 * like it is most often that key misspelt (`threshhold`, `Now`), and the message says so. Validators name the missing field only: typia does not report an unknown key beside a
 * missing one inside a union member (the tenant file's triggers), nor beside a missing required
 * property of a body.
 */

/**
 * The first of `keys`, other than `name`, within a few edits of it (letter case ignored); null if
 * none. The edits allowed grow with the name, one per three letters up to two, so that a short
 * name matches its own spelling in another case only: with two edits `id` matched `tz`, a valid
 * field of the same object, which the message then called unknown.
 */
export function misspeltKey(keys: readonly string[], name: string): string | null {
  const wanted = name.toLowerCase();
  const allowed = Math.min(2, Math.floor(name.length / 3));
  return keys.find((key) => key !== name && editDistance(key.toLowerCase(), wanted) <= allowed) ?? null;
}

/** Levenshtein distance (keys are short: the table is small). */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    previous = current;
  }
  return previous[b.length]!;
}

/**
 * The value at a typia path (`$input.tenants[0].points[1]`, `$input["odd key"]`) inside `root`,
 * and the path's last property name; undefined where the path leaves the value.
 */
function atTypiaPath(root: unknown, path: string): { parent: unknown; field: string | number | undefined } {
  const steps = [...path.matchAll(/\.([A-Za-z_$][\w$]*)|\[(\d+)\]|\["((?:[^"\\]|\\.)*)"\]/g)].map((m) => m[1] ?? (m[2] !== undefined ? Number(m[2]) : (JSON.parse(`"${m[3]}"`) as string)));
  const field = steps.pop();
  let node: unknown = root;
  for (const step of steps) node = node !== null && typeof node === "object" ? (node as Record<string | number, unknown>)[step] : undefined;
  return { parent: node, field };
}

/** The misspelling of the field a typia path names as missing, among its parent object's keys; null if none. */
export function misspeltAt(root: unknown, path: string): string | null {
  const { parent, field } = atTypiaPath(root, path);
  if (typeof field !== "string" || parent === null || typeof parent !== "object" || Array.isArray(parent)) return null;
  return misspeltKey(Object.keys(parent), field);
}
