import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import typia from "typia";
import { parse as parseYaml } from "yaml";
import { misspeltAt } from "../domain/spelling.js";
import { compileConfig, ConfigError } from "./compile.js";
import { urlForDisplay } from "../redact.js";
import type { CompiledTenant } from "./compiled.js";
import type { ConfigFile } from "./types.js";

const validateConfig = typia.createValidateEquals<ConfigFile>();

/** Keys that ship in config/demo.yaml; a production start with any of them is refused. */
export const DEMO_KEYS = ["demo-key", "demo-admin-key"];
const DEMO_KEY_DIGESTS = DEMO_KEYS.map((k) => createHash("sha256").update(k).digest("hex"));

/**
 * Reads, validates and compiles a tenant file. Throws ConfigError naming the path of the first
 * bad field (typia's `$input.tenants[0].metrics[1].key` notation) and the others after it, so a
 * bad file stops the start with a message an operator can act on.
 */
export function loadConfigText(text: string, source: string, env: NodeJS.ProcessEnv = process.env): CompiledTenant[] {
  let raw: unknown;
  try {
    // A JSON file is checked as JSON, then read by the YAML parser (JSON is YAML 1.2), which
    // refuses duplicate keys: JSON.parse keeps the last of them without a word.
    raw = source.endsWith(".json") ? (JSON.parse(text), parseYaml(text)) : parseYaml(text);
  } catch (err) {
    throw new ConfigError("", `${source} is not valid ${source.endsWith(".json") ? "JSON" : "YAML"}: ${parseFault(err)}`);
  }
  const result = validateConfig(raw);
  if (!result.success) {
    // Every fault at once (up to SHOWN_ERRORS), so that a file is mended in one start, not one
    // start per fault; a misspelt key is two faults, the key missing and the key unknown.
    const [first, ...others] = result.errors;
    const also = others.slice(0, SHOWN_ERRORS - 1).map((e) => `; ${e.path}: ${describeError(e, raw)}`);
    const more = others.length >= SHOWN_ERRORS ? ` (and ${others.length - SHOWN_ERRORS + 1} more)` : "";
    throw new ConfigError(first!.path, `${describeError(first!, raw)}${also.join("")}${more}`);
  }
  if (env.NODE_ENV === "production") {
    result.data.tenants.forEach((t, i) => {
      for (const kind of ["apiKeys", "adminKeys"] as const) {
        t[kind].forEach((k, j) => {
          // Written plain or as their digest ({sha256}): the same keys either way.
          if (typeof k === "string" ? DEMO_KEYS.includes(k) : DEMO_KEY_DIGESTS.includes(k.sha256)) {
            throw new ConfigError(`$input.tenants[${i}].${kind}[${j}]`, "the demo keys are refused when NODE_ENV=production");
          }
        });
      }
    });
  }
  return compileConfig(result.data);
}

export function loadConfigFile(path: string, env: NodeJS.ProcessEnv = process.env): CompiledTenant[] {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new ConfigError("", `cannot read ${path}: ${(err as Error).message}`);
  }
  return loadConfigText(text, path, env);
}

/** How many of a file's faults one start names; the rest are counted. */
const SHOWN_ERRORS = 10;

function describeError(error: { path: string; expected: string; value: unknown }, raw: unknown): string {
  if (error.expected === "undefined") return "unknown field (a misspelt key? its value is not shown: it may be a secret)";
  const described = `expected ${error.expected}, got ${describeValue(error.path, error.value)}`;
  if (error.value !== undefined) return described;
  // A required field missing: a key spelt almost like it is named (domain/spelling.ts).
  const misspelt = misspeltAt(raw, error.path);
  return misspelt === null ? described : `${described} (the field is spelt ${JSON.stringify(misspelt)} here)`;
}

/**
 * A parser's message without the text of the file it quotes: yaml's quotes the lines around the
 * fault, V8's JSON.parse a stretch of the file, and the lines of a tenant file hold its API and
 * admin keys, its webhooks' secrets and URLs (the start's message is logged). Where the fault is
 * stays: yaml's line and column, V8's position (or the token it did not expect).
 */
function parseFault(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  // yaml: "<what> at line L, column C:\n\n<the lines>\n^\n".
  const first = message.split("\n", 1)[0]!.replace(/:$/, "");
  // V8: "Unexpected token 'k', ..."<the text>"... is not valid JSON".
  return first.replace(/, (?:\.\.\.)?".*"(?:\.\.\.)? is not valid JSON$/, " (the text around it not shown: it may hold a credential)");
}

/** A credential's place in the tenant file: API and admin keys (their digest form too), webhook secrets. */
const SECRET_PATH = /\.(apiKeys|adminKeys|secrets?)(\[\d+\])?(\.sha256)?$/;
/** A webhook endpoint's URL in the tenant file (redact.ts urlForDisplay). */
const WEBHOOK_URL_PATH = /\.webhooks\[\d+\]\.url$/;

/**
 * The refused value as the error shows it. The start's error is logged, and the {sha256} form of
 * keys exists so that no secret is written down: a credential is shown by its kind and length
 * only, whatever its type (a key written as a number too). The value of an unknown field is never
 * shown (describeError): it may be a misspelt credential field (`apikeys`, `secrte`). Nor is an
 * object's or a list's: it may hold credentials anywhere inside (a refused `webhooks` map printed
 * its endpoints' secrets and URLs whole).
 */
function describeValue(path: string, value: unknown): string {
  const text = JSON.stringify(value) ?? "undefined";
  // A missing credential has nothing to hide: "got undefined", as any missing field (it said "a
  // undefined of 9 characters", the length of the word).
  if (value === undefined) return text;
  if (SECRET_PATH.test(path)) return `a ${Array.isArray(value) ? "list" : typeof value} of ${typeof value === "string" ? [...value].length : text.length} characters (not shown: a credential)`;
  // A webhook endpoint's URL may hold one (its userinfo, query or path): its scheme and host only;
  // so does any text that reads as a URL (an endpoint's URL written where the list belongs).
  if (typeof value === "string" && (WEBHOOK_URL_PATH.test(path) || value.includes("://"))) return urlForDisplay(value);
  // A refused object or list (a tenant written as a list, `webhooks` as a map) may hold keys,
  // secrets and URLs at any depth: its kind and size only.
  if (Array.isArray(value)) return `a list of ${value.length} item${value.length === 1 ? "" : "s"} (not shown: it may hold a credential)`;
  if (typeof value === "object" && value !== null) {
    const fields = Object.keys(value).length;
    return `an object of ${fields} field${fields === 1 ? "" : "s"} (not shown: it may hold a credential)`;
  }
  return text;
}
