import { describe, expect, it } from "vitest";
import { ErrorCodes, LaurelError } from "../../src/domain/errors.js";
import { startFailureMessage } from "../../src/boot.js";
import { errorAnswer } from "../../src/http/router.js";

/**
 * What a request answers when Redis refused its command before running it (README: Errors): a
 * 503 that says nothing was recorded, never a 500. Each cause also answers end to end in
 * test/integration (redis-address: maxmemory, a failed snapshot, min-replicas-to-write;
 * redis-failover: a demoted primary); a loading Redis and one held by a long script cannot be
 * brought about on cue, so their errors, as Redis 7 words them, are answered here.
 */
describe("errorAnswer", () => {
  const refusals: [string, keyof typeof ErrorCodes, keyof typeof ErrorCodes][] = [
    ["OOM command not allowed when used memory > 'maxmemory'.", "REDIS_OUT_OF_MEMORY", "REDIS_OUT_OF_MEMORY_READ"],
    ["READONLY You can't write against a read only replica.", "REDIS_READ_ONLY", "REDIS_READ_ONLY_READ"],
    ["MISCONF Errors writing to the AOF file: No space left on device", "REDIS_DISK_ERROR", "REDIS_DISK_ERROR_READ"],
    ["NOREPLICAS Not enough good replicas to write.", "REDIS_TOO_FEW_REPLICAS", "REDIS_TOO_FEW_REPLICAS_READ"],
    ["LOADING Redis is loading the dataset in memory", "REDIS_LOADING", "REDIS_LOADING_READ"],
    ["BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.", "REDIS_BUSY", "REDIS_BUSY_READ"],
    ["WRONGPASS invalid username-password pair or user is disabled.", "REDIS_CREDENTIALS_REFUSED", "REDIS_CREDENTIALS_REFUSED_READ"],
    ["NOAUTH Authentication required.", "REDIS_AUTHENTICATION_REQUIRED", "REDIS_AUTHENTICATION_REQUIRED_READ"],
  ];

  it.each(refusals)("answers %s as a 503 for a write and for a read", (message, write, read) => {
    expect(errorAnswer(new Error(message), false)).toMatchObject({ ...ErrorCodes[write], kind: "refused" });
    expect(errorAnswer(new Error(message), true)).toMatchObject({ ...ErrorCodes[read], kind: "refused" });
    expect(ErrorCodes[write].status).toBe(503);
    expect(ErrorCodes[write].message).toMatch(/nothing was recorded/);
  });

  it("gives each cause its own log line", () => {
    const causes = refusals.map(([message]) => errorAnswer(new Error(message), false).cause);
    expect(new Set(causes).size).toBe(refusals.length);
  });

  it("answers a request's own error as it says, ioredis giving up as unreachable, and anything else 500", () => {
    expect(errorAnswer(new LaurelError("METRIC_NOT_FOUND", "Metric not found: x"), false)).toEqual({ status: 404, message: "Metric not found: x", kind: "request" });
    expect(errorAnswer(Object.assign(new Error("Reached the max retries per request limit"), { name: "MaxRetriesPerRequestError" }), false)).toMatchObject({ status: 503, kind: "unreachable" });
    // A refusal's word inside another error is not a refusal: only as its first word.
    expect(errorAnswer(new Error("ERR Error running script: OOM in Lua"), false)).toEqual({ status: 500, message: "Internal server error", kind: "internal" });
    expect(errorAnswer("READONLY", false)).toMatchObject({ status: 500, kind: "internal" });
  });
});

describe("startFailureMessage", () => {
  it("names Redis's refusals at a start as a running service logs them", () => {
    expect(startFailureMessage(new Error("OOM command not allowed when used memory > 'maxmemory'."))).toBe("the start failed: redis is out of memory (maxmemory): writes are refused");
    expect(startFailureMessage(new Error("NOREPLICAS Not enough good replicas to write."))).toBe("the start failed: redis has too few replicas in sync (min-replicas-to-write): writes are refused");
    expect(startFailureMessage(new Error("READONLY You can't write against a read only replica."))).toBe("the start failed: REDIS_URL names a read-only replica; point it at the primary");
    // NOPERM is not a refusal of Redis's state but of the user's ACL: the command, keys or channels it forbids.
    expect(startFailureMessage(new Error("NOPERM this user has no permissions to run the 'hset' command"))).toBe(
      "the start failed: the Redis user in REDIS_URL may not run 'hset' (NOPERM, its ACL); allow it (README, Operations)",
    );
    expect(startFailureMessage(new Error("NOPERM this user has no permissions to run the 'function|load' command"))).toBe(
      "the start failed: the Redis user in REDIS_URL may not run 'function load' (NOPERM, its ACL); allow it (+function), or set LAUREL_LUA=eval to run the scripts with EVALSHA",
    );
    expect(startFailureMessage(new Error("NOPERM this user has no permissions to access one of the keys used as arguments"))).toBe(
      "the start failed: the Redis user in REDIS_URL may not use some of Laurel's keys (NOPERM, its ACL's key patterns); allow ~* (README, Operations)",
    );
    expect(startFailureMessage(new Error("NOPERM this user has no permissions to access one of the channels used as arguments"))).toBe(
      "the start failed: the Redis user in REDIS_URL may not use some channels (NOPERM, its ACL's channel patterns); allow &* (README, Operations)",
    );
    expect(startFailureMessage(new Error("something else"))).toBe("the start failed");
  });
});
