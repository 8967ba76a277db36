import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { countEachShard, learnShardsPerCall, onEveryShard, readEachShard } from "../../src/store/cross-shard.js";
import { loadLua } from "../../src/store/lua-loader.js";
import { setScriptMode, scriptModeFromEnv } from "../../src/store/redis-script.js";
import { commandsDuring } from "../helpers/monitor.js";
import { startTestRedis } from "../helpers/redis-server.js";

/**
 * Cross-shard reads (src/store/cross-shard.ts): a script's `--@each-shard` part (lua-loader.ts) runs
 * for each shard on every shard's keys in one call on a standalone Redis, and one call a shard on
 * a Redis Cluster node, which refuses a call whose keys hash to two slots. Both give the same
 * replies, in shard order. Real redis-servers: a standalone one and a one-node cluster.
 */
const LUA_DIR = new URL("../../lua", import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), "laurel-per-shard-"));
// One shard's keys (two) and the shared arguments, echoed back: the order and the shadowing of KEYS show.
writeFileSync(join(dir, "echoShard-2.lua"), "--@no-writes\n--@body\nlocal shared = ARGV[1] .. '!'\n--@each-shard\nreturn { KEYS[1], KEYS[2], #KEYS, shared, #ARGV }\n");
const echoShard = loadLua(relative(LUA_DIR, join(dir, "echoShard-2")));

const SHARDS = [0, 1, 2, 3, 4];
const shardKeys = (s: number): string[] => [`{xs:${s}}:a`, `{xs:${s}}:b`];

let standalone: Awaited<ReturnType<typeof startTestRedis>>;
let clusterNode: Awaited<ReturnType<typeof startTestRedis>>;
const clients: Redis[] = [];
const client = async (url: string, learn = true, options: { username?: string; password?: string } = {}): Promise<Redis> => {
  const redis = new Redis(url, options);
  clients.push(redis);
  if (learn) await learnShardsPerCall(redis);
  return redis;
};

beforeAll(async () => {
  [standalone, clusterNode] = await Promise.all([startTestRedis(), startTestRedis({ clusterNode: true })]);
  // A few shards' sorted sets and counters: the same on both servers.
  for (const url of [standalone.url, clusterNode.url]) {
    const redis = await client(url, false);
    for (const s of SHARDS) {
      await redis.zadd(`{xs:${s}}:z`, s, `m${s}`, s + 10, `n${s}`);
      if (s % 2 === 0) await redis.hset(`{xs:${s}}:h`, "f", String(s));
    }
  }
});
afterAll(async () => {
  clients.forEach((c) => c.disconnect());
  setScriptMode(scriptModeFromEnv());
  rmSync(dir, { recursive: true, force: true });
  await Promise.all([standalone?.stop(), clusterNode?.stop()]);
});

describe("a script's --@each-shard part", () => {
  for (const mode of ["function", "eval"] as const) {
    it(`runs its body on each shard's keys in turn, replies in shard order, in one call on a standalone Redis (${mode})`, async () => {
      setScriptMode(mode);
      const redis = await client(standalone.url);
      // Loaded first (a call of a script not yet loaded is refused, then loaded and sent again).
      await onEveryShard(redis, echoShard, [shardKeys(0)], ["x"]);
      const again = await commandsDuring(standalone.url, async () => {
        expect(await onEveryShard(redis, echoShard, SHARDS.map(shardKeys), ["x", "y"])).toEqual(SHARDS.map((s) => [...shardKeys(s), 2, "x!", 2]));
      });
      expect(again.commands.map((c) => c[0]!.toLowerCase())).toEqual([mode === "eval" ? "evalsha" : "fcall"]);
      expect(again.commands[0]!.slice(2, 3)).toEqual([String(2 * SHARDS.length)]);
    });
  }

  it("on a Redis Cluster node, is one call a shard, with the same replies, and the node refuses none", async () => {
    setScriptMode("function");
    const redis = await client(clusterNode.url);
    // Loaded first (a call of a function not yet loaded is refused, then loaded and sent again).
    await onEveryShard(redis, echoShard, [shardKeys(0)], ["x"]);
    await redis.config("RESETSTAT");
    const seen = await commandsDuring(clusterNode.url, async () => {
      expect(await onEveryShard(redis, echoShard, SHARDS.map(shardKeys), ["x"])).toEqual(SHARDS.map((s) => [...shardKeys(s), 2, "x!", 1]));
    });
    expect(seen.commands.filter((c) => c[0]!.toLowerCase() === "fcall").map((c) => c[2])).toEqual(SHARDS.map(() => "2"));
    // Every call ran: none refused (CROSSSLOT) or failed inside (a key of another slot).
    expect(/cmdstat_fcall:calls=(\d+),.*rejected_calls=0,failed_calls=0/.exec(await redis.info("commandstats"))?.[1]).toBe(String(SHARDS.length));
  });

  it("is one call a shard where Redis does not say it is standalone (INFO refused), or before anyone asked", async () => {
    setScriptMode("function");
    const admin = await client(standalone.url, false);
    await admin.call("ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "&*", "+@all", "-info");
    const refused = await client(standalone.url, true, { username: "noinfo", password: "pw" });
    const unasked = await client(standalone.url, false);
    for (const redis of [refused, unasked]) {
      const seen = await commandsDuring(standalone.url, async () => {
        expect(await onEveryShard(redis, echoShard, SHARDS.map(shardKeys), ["x"])).toEqual(SHARDS.map((s) => [...shardKeys(s), 2, "x!", 1]));
      });
      expect(seen.commands.filter((c) => c[0]!.toLowerCase() === "fcall").map((c) => c[2])).toEqual(SHARDS.map(() => "2"));
    }
  });
});

describe("a count on every shard", () => {
  const keys = (suffix: string) => SHARDS.map((s) => `{xs:${s}}:${suffix}`);

  it("answers as the plain commands do, on a standalone Redis in one call and on a Cluster node as those commands", async () => {
    setScriptMode("function");
    const direct = await client(standalone.url, false);
    const expected = {
      zcount: await Promise.all(keys("z").map((k) => direct.zcount(k, "(2", "+inf"))),
      zcard: await Promise.all(keys("z").map((k) => direct.zcard(k))),
      none: await Promise.all(keys("none").map((k) => direct.zcard(k))),
    };
    expect(expected).toEqual({ zcount: [1, 1, 1, 2, 2], zcard: [2, 2, 2, 2, 2], none: [0, 0, 0, 0, 0] });
    for (const url of [standalone.url, clusterNode.url]) {
      const redis = await client(url);
      await countEachShard(redis, "ZCARD", keys("none"), []); // loads the script where it is used
      const seen = await commandsDuring(url, async () => {
        expect(await countEachShard(redis, "ZCOUNT", keys("z"), ["(2", "+inf"])).toEqual(expected.zcount);
        expect(await countEachShard(redis, "ZCARD", keys("z"), [])).toEqual(expected.zcard);
        expect(await countEachShard(redis, "ZCARD", keys("none"), [])).toEqual(expected.none);
      });
      const sent = seen.commands.map((c) => c[0]!.toLowerCase());
      if (url === standalone.url) expect(sent).toEqual(Array(3).fill("fcall"));
      else expect(sent).toEqual(["zcount", "zcard", "zcard"].flatMap((c) => Array<string>(SHARDS.length).fill(c)));
    }
  });
});

describe("a read of strings on every shard", () => {
  const keys = (suffix: string) => SHARDS.map((s) => `{xs:${s}}:${suffix}`);

  it("is one plain command a shard on any Redis, answering as the client's own commands do, nulls kept", async () => {
    const direct = await client(standalone.url, false);
    const expected = {
      hmget: await Promise.all(keys("h").map((k) => direct.hmget(k, "f", "missing"))),
      zrevrange: await Promise.all(keys("z").map((k) => direct.zrevrange(k, 0, -1, "WITHSCORES"))),
    };
    expect(expected.hmget[1]).toEqual([null, null]);
    expect(expected.hmget[2]).toEqual(["2", null]);
    for (const url of [standalone.url, clusterNode.url]) {
      const redis = await client(url);
      const seen = await commandsDuring(url, async () => {
        expect(await readEachShard(redis, "hmget", keys("h"), ["f", "missing"])).toEqual(expected.hmget);
        expect(await readEachShard(redis, "zrevrange", keys("z"), [0, -1, "WITHSCORES"])).toEqual(expected.zrevrange);
      });
      expect(seen.commands.map((c) => c[0]!.toLowerCase())).toEqual(["hmget", "zrevrange"].flatMap((c) => Array<string>(SHARDS.length).fill(c)));
    }
  });
});
