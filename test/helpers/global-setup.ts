import type { TestProject } from "vitest/node";
import { startTestRedis } from "./redis-server.js";

/**
 * One redis-server per test run, on a free port (never the machine's 6379), so the suite is
 * hermetic. Test files isolate themselves with their own tenant ids; tests that must restart or
 * kill Redis start their own with startTestRedis.
 */
export default async function setup(project: TestProject) {
  const redis = await startTestRedis();
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
