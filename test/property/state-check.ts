import { expect } from "vitest";
import type { CompiledTenant } from "../../src/config/compiled.js";
import { boardMember } from "../../src/domain/leaderboards.js";
import { usersAtLevels, type ModelState } from "../../src/domain/model.js";
import { readStoreOf } from "../../src/store/read-store.js";
import type { TestApp } from "../helpers/app.js";

async function zsetAcrossShards(t: TestApp, tenant: CompiledTenant, suffix: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (let shard = 0; shard < tenant.shards; shard++) {
    const z = await t.redis.zrange(`{${tenant.id}:${shard}}:${suffix}`, 0, -1, "WITHSCORES");
    for (let i = 0; i < z.length; i += 2) out[z[i]!] = Number(z[i + 1]);
  }
  return out;
}

/**
 * The tenant's stored aggregates equal the model's: shard counters summed (users, completions),
 * points zsets and the users per level counted from them, streak zsets and histories,
 * time-trigger schedules.
 */
export async function expectStateEqual(t: TestApp, tenant: CompiledTenant, model: ModelState): Promise<void> {
  let users = 0;
  const completions = new Map<string, number>();
  for (let shard = 0; shard < tenant.shards; shard++) {
    const agg = await t.redis.hgetall(`{${tenant.id}:${shard}}:agg`);
    for (const [field, value] of Object.entries(agg)) {
      if (field === "users") users += Number(value);
      else if (field.startsWith("ac:")) completions.set(field.slice(3), (completions.get(field.slice(3)) ?? 0) + Number(value));
    }
  }
  expect(users, "users").toBe(model.userCount);
  expect(Object.fromEntries(completions), "completions").toEqual(Object.fromEntries(model.completions));
  for (const [suffix, expected] of [["sa", model.streakActive], ["sd", model.streakDeadline], ["sb", model.streakBest]] as const) {
    expect(await zsetAcrossShards(t, tenant, suffix), suffix).toEqual(Object.fromEntries(expected));
  }
  const store = t.app.tenants.all.find((c) => c.tenant.id === tenant.id)!.store;
  for (const [userId, history] of model.streakHistory) {
    const z = await t.redis.zrange(`{${tenant.id}:${store.shard(userId)}}:sh:${userId}`, 0, -1);
    expect(z, `history of ${userId}`).toEqual([...history].sort((a, b) => a[0] - b[0]).map(([, member]) => member));
  }
  for (const system of tenant.systems) {
    const expected: Record<string, number> = {};
    for (const [userId, user] of model.users) {
      const p = user.points.get(system.key);
      if (p) expected[userId] = p.total;
    }
    expect(await zsetAcrossShards(t, tenant, `pz:${system.key}`), `points ${system.key}`).toEqual(expected);
    if (system.levels.length > 0) {
      const levels = system.levels.map((l) => l.points);
      expect(await readStoreOf(store).usersAtLevels(system.key, levels), `users per level of ${system.key}`).toEqual(usersAtLevels(tenant, model, system.key));
    }
  }
  // The stream records' creation, achievement and points parts (what webhooks are made from), per
  // user in order. Once the stream worker has applied records (the summaries' and wrapped's reads
  // drain it) the stream is trimmed below them: what is left of a user's records is then the
  // newest of the model's.
  const records = new Map<string, { kind: string; parts: string[] }[]>();
  let trimmed = false;
  for (let shard = 0; shard < (model.users.size > 0 ? tenant.shards : 0); shard++) {
    const stream = `{${tenant.id}:${shard}}:x`;
    if ((await t.redis.exists(stream)) && ((await t.redis.xinfo("GROUPS", stream)) as unknown[]).length > 0) trimmed = true;
    for (const [, flat] of await t.redis.xrange(stream, "-", "+")) {
      const f: Record<string, string> = {};
      for (let i = 0; i + 1 < flat.length; i += 2) f[flat[i]!] = flat[i + 1]!;
      const parts = (f.o ?? "").split(";").filter((p) => p === "c" || p.startsWith("a:") || p.startsWith("p:"));
      if (parts.length === 0) continue;
      const list = records.get(f.u!) ?? [];
      list.push({ kind: f.k!, parts: parts.sort() });
      records.set(f.u!, list);
    }
  }
  for (const [userId, user] of model.users) {
    const stored = records.get(userId) ?? [];
    const expected = user.records.map((r) => ({ kind: r.kind, parts: [...r.parts].sort() }));
    expect(stored, `stream records of ${userId}`).toEqual(trimmed ? expected.slice(expected.length - stored.length) : expected);
  }
  for (const [trigger, due] of model.timeDue) {
    expect(await zsetAcrossShards(t, tenant, `tt:${trigger}`), `time trigger ${trigger}`).toEqual(Object.fromEntries(due));
  }
}

/**
 * Every board run's sets (each group's, over the shards) hold exactly the model's entries: each
 * user once, with the value and the instant it was reached (the member). A clock set back into
 * an earlier run and forward again must leave neither run with a user twice (lua pastEntry).
 * `firstKept`: a board's first run still stored (the retention job deletes the runs before it;
 * the model keeps their entries).
 */
export async function expectBoardSetsEqual(t: TestApp, tenant: CompiledTenant, model: ModelState, firstKept: (boardKey: string) => number): Promise<void> {
  const store = t.app.tenants.all.find((c) => c.tenant.id === tenant.id)!.store;
  for (const [id, entries] of model.boards) {
    const [boardKey, run, group] = id.split(":") as [string, string, string];
    if (Number(run) < firstKept(boardKey)) continue;
    const stored: string[] = [];
    const shards = Array.from({ length: tenant.shards }, (_, shard) => t.redis.zrange(store.keys.boardRun(shard, boardKey, Number(run), group), 0, -1, "WITHSCORES"));
    for (const list of await Promise.all(shards)) for (let i = 0; i < list.length; i += 2) stored.push(`${list[i]}=${list[i + 1]}`);
    const expected = [...entries].map(([user, e]) => `${boardMember(e.reachedAt, user)}=${e.value}`);
    expect(stored.sort(), `board ${id}`).toEqual(expected.sort());
  }
}
