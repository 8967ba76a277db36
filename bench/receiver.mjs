// A tiny webhook receiver for bench/webhooks.mjs: answers 200 to every POST, counts them and the
// distinct event ids (webhook-id). GET /count answers {"requests": n, "ids": n}; GET /reset sets
// both to 0; GET /ping 200.
import { createServer } from "node:http";

const port = Number(process.env.PORT ?? 0);
let requests = 0;
const ids = new Set();

createServer((req, res) => {
  if (req.method === "GET") {
    if (req.url === "/reset") {
      requests = 0;
      ids.clear();
    }
    const body = req.url === "/count" ? JSON.stringify({ requests, ids: ids.size }) : "ok";
    res.writeHead(200, { "content-type": "application/json" }).end(body);
    return;
  }
  req.resume();
  req.on("end", () => {
    requests++;
    ids.add(req.headers["webhook-id"]);
    res.writeHead(200).end("ok");
  });
}).listen(port, "127.0.0.1");
