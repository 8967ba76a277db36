import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { checkEnvironmentOrExit, listenPort } from "../../src/boot.js";
import { MAX_AWARD_ID_SLOTS } from "../../src/domain/award-ids.js";

// boot.ts checkEnvironmentOrExit: the refusals are tested on the built service (startup.test.ts,
// "refuses a switch set to a value it does not take"); here, the values at the edge of what it
// takes, which must start. A refusal would call process.exit, which vitest reports as a failure.
describe("the environment check", () => {
  const check = (env: NodeJS.ProcessEnv) => {
    const lines: unknown[] = [];
    checkEnvironmentOrExit(pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) }), env, { port: true });
    return lines;
  };

  it("takes every value at the edge of what it accepts, and says nothing", () => {
    const edges: NodeJS.ProcessEnv[] = [
      { PORT: "65535", LAUREL_REDIS_WAIT: "0.5", LAUREL_DRAIN: "0", LAUREL_AWARD_IDS: String(MAX_AWARD_ID_SLOTS), LOG_LEVEL: "silent" },
      { PORT: "0", LAUREL_REDIS_WAIT: "0", LAUREL_DRAIN: "2.5", LAUREL_AWARD_IDS: "0", LOG_LEVEL: "trace" },
      { LAUREL_AWARD_IDS: "1", LOG_LEVEL: "fatal" },
      // Each switch's values, both of them.
      { LAUREL_CLOCK: "manual", LAUREL_WORKER: "on", LAUREL_DELIVERIES: "on", LAUREL_COALESCE: "on", LAUREL_LUA: "function", LAUREL_AUTOPIPELINE: "0", LAUREL_REUSE_PORT: "0", LAUREL_FSYNC: "everysec" },
      { LAUREL_CLOCK: "system", LAUREL_WORKER: "off", LAUREL_DELIVERIES: "off", LAUREL_COALESCE: "off", LAUREL_LUA: "eval", LAUREL_AUTOPIPELINE: "1", LAUREL_REUSE_PORT: "1", LAUREL_FSYNC: "always" },
      // Empty is unset (a compose file's ${VAR} of an unset variable).
      { PORT: "", LOG_LEVEL: "", LAUREL_CLOCK: "", LAUREL_REDIS_WAIT: "", LAUREL_DRAIN: "", LAUREL_AWARD_IDS: "" },
    ];
    for (const env of edges) expect(check(env), JSON.stringify(env)).toEqual([]);
  });

  it("listens on the port given, 65535 and 0 (any free port) included, and on 3000 when PORT is unset", () => {
    expect(listenPort("65535")).toBe(65535);
    expect(listenPort("0")).toBe(0);
    const saved = process.env.PORT;
    try {
      delete process.env.PORT;
      expect(listenPort()).toBe(3000);
      process.env.PORT = "";
      expect(listenPort()).toBe(3000);
    } finally {
      if (saved === undefined) delete process.env.PORT;
      else process.env.PORT = saved;
    }
  });
});
