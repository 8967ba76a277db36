import { hostname } from "node:os";

/**
 * This process among those sharing a Redis: host and pid. The stream consumers name themselves
 * by it, and /metrics labels its per-process series with it.
 */
export const PROCESS_NAME = `${hostname()}-${process.pid}`;
