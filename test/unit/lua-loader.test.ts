import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadLua } from "../../src/store/lua-loader.js";

/**
 * The loader inlines each `-- @include` once (store/lua-loader.ts, as BullMQ's script-loader
 * does): a helper inlined twice defines its locals twice, and the second copy silently shadows
 * the first. A file naming the same include twice is refused, naming the file and the line.
 * The fixture lives in a temporary directory, not in lua/: the loader names scripts and includes
 * relative to lua/, so the fixture's names are its path from there.
 */
const LUA_DIR = new URL("../../lua", import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), "laurel-lua-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the Lua loader's includes", () => {
  it("refuses a script that includes the same file twice, naming the file and the line", () => {
    const helper = relative(LUA_DIR, join(dir, "helper.lua"));
    writeFileSync(join(dir, "helper.lua"), "local function helper() return 1 end\n");
    const script = join(dir, "twice-0.lua");
    writeFileSync(script, `-- @include "${helper}"\nlocal a = 1\n-- @include "${helper}"\n--@body\nreturn helper()\n`);
    const name = relative(LUA_DIR, join(dir, "twice-0"));
    expect(() => loadLua(name)).toThrow(`${script}:3: "${helper}" is included twice`);
    // The same helper once loads, inlined (the fixture is well formed but for the repeat).
    writeFileSync(join(dir, "once-0.lua"), `-- @include "${helper}"\n--@body\nreturn helper()\n`);
    expect(loadLua(relative(LUA_DIR, join(dir, "once-0"))).text).toContain("local function helper() return 1 end");
  });
});

describe("the Lua loader's --@each-shard", () => {
  it("steps through KEYS by the script's name without a count, by the shared part's local with one", () => {
    writeFileSync(join(dir, "fixed-2.lua"), "--@body\nlocal a = 1\n--@each-shard\nreturn KEYS[1]\n");
    const fixed = loadLua(relative(LUA_DIR, join(dir, "fixed-2"))).text;
    expect(fixed).toContain("for base = 0, #all - 2, 2 do");
    expect(fixed).toContain("replies[base / 2 + 1] = oneShard(keys)");
    // pointsHistogram-2.lua: a filter's groups are more keys a shard, as many as the arguments say.
    writeFileSync(join(dir, "counted-2.lua"), "--@body\nlocal perShard = 2 + 2 * tonumber(ARGV[1])\n--@each-shard perShard\nreturn KEYS[1]\n");
    const counted = loadLua(relative(LUA_DIR, join(dir, "counted-2"))).text;
    expect(counted).toContain("for base = 0, #all - perShard, perShard do");
    expect(counted).toContain("for i = 1, perShard do keys[i] = all[base + i] end");
    expect(counted.indexOf("local perShard = 2 + 2 * tonumber(ARGV[1])")).toBeLessThan(counted.indexOf("local oneShard = function(KEYS)"));
  });
});
