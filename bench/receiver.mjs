// A tiny webhook receiver for bench/webhooks.mjs and bench/delivery-cost.mjs: answers 200 to every
// POST, counts them and the distinct event ids (webhook-id). GET /count answers
// {"requests": n, "ids": n}; GET /reset sets both to 0; GET /ping 200.
//
// It shares the box with the service, so its CPU is taken from what the service could use. Since
// the tenth stop it is the uWS build the service runs on (~3× less CPU per POST than the
// node:http receiver it replaced: bench/README.md, "The tenth stop"), so that the webhook figures
// carry less of the bench and more of Laurel. RECEIVER=node selects the node:http one, to compare
// with runs recorded before.
import { createServer } from "node:http";
import uWS from "uWebSockets.js";

const port = Number(process.env.PORT ?? 0);
let requests = 0;
const ids = new Set();

function counted(path) {
  if (path === "/reset") {
    requests = 0;
    ids.clear();
  }
  return path === "/count" ? JSON.stringify({ requests, ids: ids.size }) : "ok";
}

if (process.env.RECEIVER === "node") {
  createServer((req, res) => {
    if (req.method === "GET") {
      res.writeHead(200, { "content-type": "application/json" }).end(counted(req.url));
      return;
    }
    req.resume();
    req.on("end", () => {
      requests++;
      ids.add(req.headers["webhook-id"]);
      res.writeHead(200).end("ok");
    });
  }).listen(port, "127.0.0.1");
} else {
  if (typeof uWS.getParts !== "function") throw new Error("uWS native binary not loaded (JS fallback active)");
  uWS
    .App()
    .get("/*", (res, req) => {
      const body = counted(req.getUrl());
      res.cork(() => res.writeHeader("content-type", "application/json").end(body));
    })
    .post("/*", (res, req) => {
      // Headers must be read before returning: uWS frees the request object then.
      const id = req.getHeader("webhook-id");
      res.onAborted(() => {});
      res.onData((_chunk, isLast) => {
        if (!isLast) return;
        requests++;
        ids.add(id);
        res.cork(() => res.end("ok"));
      });
    })
    .listen("127.0.0.1", port, (token) => {
      if (!token) {
        console.error(`receiver: cannot listen on ${port}`);
        process.exit(1);
      }
    });
}
