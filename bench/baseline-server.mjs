// The bare baseline the service is measured against, in the same run (STACK.md §7): the same
// uWS build and the same ioredis settings as src/main.ts, with nothing in between.
//   POST /event       read the body, JSON.parse it, one EVALSHA of a one-call script keyed by user.id
//   GET  /users/:id   one HGET
//   GET  /ping        readiness probe
// Environment: PORT, REDIS_URL, LAUREL_COALESCE and LAUREL_AUTOPIPELINE (as the service reads them).
import uWS from "uWebSockets.js";
import { createRedisClient } from "../dist/store/redis-client.js";

if (typeof uWS.getParts !== "function") throw new Error("uWS native binary not loaded (JS fallback active)");

const MAX_BODY_BYTES = 64 * 1024; // the service's DEFAULT_MAX_BODY_BYTES
const TRIVIAL_LUA = "return redis.call('HINCRBY', KEYS[1], 'n', 1)";

// The service's own client factory: the same options and the same write coalescing
// (LAUREL_COALESCE, LAUREL_AUTOPIPELINE), so the baseline carries what the service's client can.
const redis = createRedisClient(process.env.REDIS_URL);
const sha = await redis.script("LOAD", TRIVIAL_LUA);

function send(res, status, json) {
  res.cork(() => res.writeStatus(status).writeHeader("content-type", "application/json").end(json));
}

function reply(res, state, promise) {
  promise.then(
    (value) => { if (!state.aborted) send(res, "200 OK", JSON.stringify({ value })); },
    (err) => { if (!state.aborted) send(res, "500 Internal Server Error", JSON.stringify({ error: err.message })); },
  );
}

uWS
  .App()
  .post("/event", (res) => {
    const state = { aborted: false };
    res.onAborted(() => { state.aborted = true; });
    const chunks = [];
    let size = 0;
    res.onData((chunk, isLast) => {
      size += chunk.byteLength;
      if (size > MAX_BODY_BYTES) return void send(res, "413 Payload Too Large", "{}");
      chunks.push(Buffer.from(new Uint8Array(chunk).slice())); // chunks are neutered on return
      if (!isLast) return;
      let userId;
      try {
        userId = JSON.parse(Buffer.concat(chunks, size).toString("utf8")).user.id;
      } catch {
        return void send(res, "400 Bad Request", '{"error":"bad body"}');
      }
      reply(res, state, redis.evalsha(sha, 1, `{b}:u:${userId}`));
    });
  })
  .get("/users/:id", (res, req) => {
    const state = { aborted: false };
    res.onAborted(() => { state.aborted = true; });
    reply(res, state, redis.hget(`{b}:u:${req.getParameter(0)}`, "n"));
  })
  .get("/ping", (res) => { res.end("ok"); })
  .listen("127.0.0.1", Number(process.env.PORT), (socket) => {
    if (!socket) {
      console.error(`baseline: cannot listen on port ${process.env.PORT}`);
      process.exit(1);
    }
  });

process.on("SIGTERM", () => {
  redis.disconnect();
  process.exit(0);
});
