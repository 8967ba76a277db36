import type { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it } from "vitest";
import { TenantKeys } from "../../src/store/keys.js";
import { createRedisClient } from "../../src/store/redis-client.js";
import { demoConfig, startTestApp } from "../helpers/app.js";
import { startTestRedis } from "../helpers/redis-server.js";

// The state array is decoded through Lua's stack (lua/includes/state.lua decodeState), which
// holds 8000 values (LUAI_MAXCSTACK); cmsgpack.unpack builds the table without that limit. A
// registry of thousands of names (a large config, or names retired over many config changes:
// positions are never reused) must not make an existing user's events fail: a long array goes
// through cmsgpack.unpack (found by a review: with every array on the stack, the second event of
// a user under a registry of 8000 names was a 500).
let server: Awaited<ReturnType<typeof startTestRedis>>;
let redis: Redis;
beforeAll(async () => {
  server = await startTestRedis();
  redis = createRedisClient(server.url);
});
afterAll(async () => {
  redis.disconnect();
  await server.stop();
});

it.each([3000, 8000])("an event on an existing user succeeds with a state of %i more positions", async (retired) => {
  const { yaml, tenantId } = demoConfig();
  const keys = new TenantKeys(tenantId);
  // The names of the config first (as a registry would have them), then the retired ones.
  await startTestApp({ yaml, redisUrl: server.url, manualClock: "2026-03-02T12:00:00Z", jobs: false }).then((t) => t.close());
  const size = await redis.hlen(keys.slots());
  const args: (string | number)[] = [];
  for (let i = 1; i <= retired; i++) args.push(`retired:${i}`, size + i);
  await redis.hset(keys.slots(), ...args);
  const t = await startTestApp({ yaml, redisUrl: server.url, manualClock: "2026-03-02T12:00:00Z", jobs: false });
  try {
    const first = await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "big" }, value: 1 });
    expect(first.status).toBe(201);
    const second = await t.call("POST", "/v1/metrics/lessons/event", { user: { id: "big" }, value: 1 });
    expect(second.status).toBe(201);
    expect(second.body.total).toBe(2);
    expect(second.body.points.xp).toMatchObject({ added: 10, total: 20 });
  } finally {
    await t.close();
  }
});
