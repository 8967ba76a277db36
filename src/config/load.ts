import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import typia from "typia";
import { parse as parseYaml } from "yaml";
import { compileConfig, ConfigError } from "./compile.js";
import type { CompiledTenant } from "./compiled.js";
import type { ConfigFile } from "./types.js";

const validateConfig = typia.createValidateEquals<ConfigFile>();

/** Keys that ship in config/demo.yaml; a production start with any of them is refused. */
export const DEMO_KEYS = ["demo-key", "demo-admin-key"];
const DEMO_KEY_DIGESTS = DEMO_KEYS.map((k) => createHash("sha256").update(k).digest("hex"));

/**
 * Reads, validates and compiles a tenant file. Throws ConfigError naming the path of the first
 * bad field (typia's `$input.tenants[0].metrics[1].key` notation), so a bad file stops the start
 * with a message an operator can act on.
 */
export function loadConfigText(text: string, source: string, env: NodeJS.ProcessEnv = process.env): CompiledTenant[] {
  let raw: unknown;
  try {
    // A JSON file is checked as JSON, then read by the YAML parser (JSON is YAML 1.2), which
    // refuses duplicate keys: JSON.parse keeps the last of them without a word.
    raw = source.endsWith(".json") ? (JSON.parse(text), parseYaml(text)) : parseYaml(text);
  } catch (err) {
    throw new ConfigError("$input", `${source} is not valid ${source.endsWith(".json") ? "JSON" : "YAML"}: ${(err as Error).message}`);
  }
  const result = validateConfig(raw);
  if (!result.success) {
    const first = result.errors[0]!;
    const more = result.errors.length > 1 ? ` (and ${result.errors.length - 1} more)` : "";
    throw new ConfigError(first.path, `expected ${first.expected}, got ${describeValue(first.path, first.value, first.expected)}${more}`);
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
    throw new ConfigError("$input", `cannot read ${path}: ${(err as Error).message}`);
  }
  return loadConfigText(text, path, env);
}

/** A credential's place in the tenant file: API and admin keys (their digest form too), webhook secrets. */
const SECRET_PATH = /\.(apiKeys|adminKeys|secrets?)(\[\d+\])?(\.sha256)?$/;

/**
 * The refused value as the error shows it. The start's error is logged, and the {sha256} form of
 * keys exists so that no secret is written down: a credential is shown by its kind and length
 * only, whatever its type (a key written as a number too), and so is the value of an unknown
 * field, which may be a misspelt credential field (`apikeys`, `secrte`).
 */
function describeValue(path: string, value: unknown, expected: string): string {
  const text = JSON.stringify(value) ?? "undefined";
  if (SECRET_PATH.test(path)) return `a ${Array.isArray(value) ? "list" : typeof value} of ${typeof value === "string" ? [...value].length : text.length} characters (not shown: a credential)`;
  if (expected === "undefined") return `a value (not shown: an unknown field may be a misspelt key or secret)`;
  return text;
}
