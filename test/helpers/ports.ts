import { connect } from "node:net";

/** A free port below the kernel's ephemeral range (src/embedded-redis.ts says when a test needs one). */
export { portOutsideEphemeralRange } from "../../src/embedded-redis.js";

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
