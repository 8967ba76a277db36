import { afterAll, describe, expect, inject, it } from "vitest";
import { toLuaLiteral } from "../../src/store/lua-loader.js";
import { createRedisClient } from "../../src/store/redis-client.js";

// store/lua-loader.ts toLuaLiteral: the rules go into each script as a Lua table constructor.
// Read back by Redis's own Lua, each value must be the one given: a name with a backslash, a
// quote, a newline or a control byte before a digit (a config's display names and keys) once
// encoded wrong is a script Redis refuses, or a name changed on the way.
describe("the rules literal, read back by Redis's Lua", () => {
  const redis = createRedisClient(inject("redisUrl"));
  afterAll(() => redis.quit());

  it("keeps every byte of a string, and null, undefined, booleans, integers and fractions", async () => {
    const tricky = 'a\\b "q" line\nnext\ttab\t1 nul\u00001 bell\u00079 del\u007f é 😀 end';
    const literal = toLuaLiteral({ s: tricky, n: [null, undefined, false, true, 7, 2.5], "k-ey": 1 });
    const script = `local R = ${literal}
      return {R.s, tostring(R.n[1]), tostring(R.n[2]), tostring(R.n[3]), tostring(R.n[4]), tostring(R.n[5]), tostring(R.n[6]), tostring(R["k-ey"])}`;
    expect(await redis.eval(script, 0)).toEqual([tricky, "false", "false", "false", "true", "7", "2.5", "1"]);
  });
});
