import type { TestProject } from "vitest/node";
import { startTestRedis } from "./redis-server.js";

/**
 * One redis-server per test run, on a free port (never the machine's 6379), so the suite is
 * hermetic. Test files isolate themselves with their own tenant ids; tests that must restart or
 * kill Redis start their own with startTestRedis.
 * LAUREL_TEST_CLUSTER_NODE=1 makes it a one-node Redis Cluster (startTestRedis clusterNode), which
 * refuses what would cross slots on a real cluster: the tests that then fail are what still
 * assumes one Redis (README, Operations: Scaling).
 */
export default async function setup(project: TestProject) {
  const redis = await startTestRedis({ clusterNode: process.env.LAUREL_TEST_CLUSTER_NODE === "1" });
  project.provide("redisUrl", redis.url);
  return async () => {
    await redis.stop();
  };
}

declare module "vitest" {
  export interface ProvidedContext {
    redisUrl: string;
  }
}
