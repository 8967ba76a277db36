// The bare baseline the service is measured against, in the same run (STACK.md §7): the same
// uWS build and the same ioredis settings as src/main.ts, with nothing in between.
//   POST /event       read the body, JSON.parse it, one EVALSHA of a one-call script keyed by user.id
//   GET  /users/:id   one HGET
//   GET  /floor/users/:id/points/:key
//                     the metering read's unavoidable part, without its rules (bench/read-floor.mjs):
//                     the API key header, both path parameters and the query read, one LRANGE of
//                     the user's award list as the service encodes it, and an answer of about the
//                     service's size (each record padded to a rendered award's bytes). No
//                     authentication, validation, parsing or rendering: what the service adds
//                     on top of this route is the code the read ÷ HGET target can still move.
//   GET  /ping        readiness probe
// Environment: PORT, REDIS_URL, LAUREL_COALESCE and LAUREL_AUTOPIPELINE (as the service reads them).
// The service's V8 settings (src/v8-tuning.ts), so that the baseline carries what the service does.
import "../dist/v8-tuning.js";
import uWS from "uWebSockets.js";
import { createRedisClient } from "../dist/store/redis-client.js";
import { sendEncoded } from "../dist/store/redis-script.js";
import { TenantKeys, shardOf } from "../dist/store/keys.js";

if (typeof uWS.getParts !== "function") throw new Error("uWS native binary not loaded (JS fallback active)");

const MAX_BODY_BYTES = 64 * 1024; // the service's DEFAULT_MAX_BODY_BYTES
const TRIVIAL_LUA = "return redis.call('HINCRBY', KEYS[1], 'n', 1)";

// The service's own client factory: the same options and the same write coalescing
// (LAUREL_COALESCE, LAUREL_AUTOPIPELINE), so the baseline carries what the service's client can.
const redis = createRedisClient(process.env.REDIS_URL);
// The floor route reads the demo tenant's keys (tenant demo, 16 shards: bench/core-tenant.yaml and config/demo.yaml).
const FLOOR_KEYS = new TenantKeys("demo");
const FLOOR_SHARDS = 16;
// A rendered award is ~280 bytes and the answer's head ~170 (the energy system's, 2026-11-25); a
// stored record is ~30. The padding is built once, so the route pays only the joins.
const FLOOR_HEAD = `{"head":"${"h".repeat(150)}","awards":[`;
const FLOOR_PAD = "p".repeat(245);
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
  .get("/floor/users/:id/points/:key", (res, req) => {
    const state = { aborted: false };
    res.onAborted(() => { state.aborted = true; });
    if (req.getHeader("x-api-key") === "") return void send(res, "401 Unauthorized", '{"error":"no key"}');
    const user = req.getParameter(0);
    const system = req.getParameter(1);
    const awards = Number(new URLSearchParams(req.getQuery()).get("awards") ?? 10);
    sendEncoded(redis, "lrange", [FLOOR_KEYS.awards(shardOf(user, FLOOR_SHARDS), system, user), 0, awards - 1]).then(
      (records) => {
        if (state.aborted) return;
        let body = FLOOR_HEAD;
        for (let i = 0; i < records.length; i++) body += `${i === 0 ? "" : ","}"${records[i]}${FLOOR_PAD}"`;
        send(res, "200 OK", `${body}]}`);
      },
      (err) => { if (!state.aborted) send(res, "500 Internal Server Error", JSON.stringify({ error: err.message })); },
    );
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
