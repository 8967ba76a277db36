import { readFileSync } from "node:fs";
import { connect, createServer } from "node:net";
import { freePort } from "../../src/embedded-redis.js";

/**
 * A free port below the kernel's ephemeral range, for a server a test stops and starts again on
 * the same port (a client must find it there again), for an address that must stay unanswered,
 * and for a service process a test starts: its start refuses a taken port (exitIfPortTaken), and
 * an ephemeral port from freePort() could be any connection's local end by then (a startup test
 * failed once so, in a full run).
 * `freePort()` asks the kernel (listen on port 0), which hands out ports of the ephemeral range, as
 * it does for every outgoing connection: between a stop and the restart, another test file's
 * freePort() or any connection's local end could take the port, and the restart failed with
 * EADDRINUSE (rare, but a failing CI run). The kernel never hands out a port below the range, so
 * only a program that names this very port could take it. Picked at random, checked by binding it.
 */
export async function portOutsideEphemeralRange(): Promise<number> {
  const low = ephemeralLow();
  const from = Math.max(10_000, low - 16_384);
  if (low - from < 1_000) return freePort(); // an unusual range: fall back to the kernel's choice
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = from + Math.floor(Math.random() * (low - from));
    if (await bindable(port)) return port;
  }
  throw new Error(`no free port found in ${from}-${low - 1}`);
}

/** The first port of the ephemeral range (net.ipv4.ip_local_port_range), 32768 where it cannot be read. */
function ephemeralLow(): number {
  try {
    return Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]) || 32_768;
  } catch {
    return 32_768;
  }
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/**
 * Whether a TCP connection to the port is refused (a stopping server closed its listen socket).
 * A raw socket, not fetch: a connection the kernel took into a closing listener's backlog left a
 * fetch waiting for minutes.
 */
export function connectionRefused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(false);
    });
    socket.once("error", (err: NodeJS.ErrnoException) => resolve(err.code === "ECONNREFUSED"));
  });
}
