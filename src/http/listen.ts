import uWS from "uWebSockets.js";
import { portTakenMessage } from "../boot.js";

/**
 * The uWebSockets.js binary Laurel runs on. The package's loader falls back to a JavaScript build
 * without saying so when the native binary does not load (STACK.md §2), and that build serves a
 * fraction of the requests: a start refuses it instead.
 */
export function assertNativeUws(): void {
  if (typeof (uWS as unknown as { getParts?: unknown }).getParts !== "function") {
    throw new Error("uWebSockets.js native binary not loaded (JS fallback active): Laurel needs Node 20 on linux-x64 glibc");
  }
}

// uSockets' LIBUS_LISTEN_EXCLUSIVE_PORT (1): the binding exports it, its typings only as an enum member.
const LISTEN_EXCLUSIVE_PORT = (uWS as unknown as { LIBUS_LISTEN_EXCLUSIVE_PORT: number }).LIBUS_LISTEN_EXCLUSIVE_PORT;

/** A process could not listen on its host and port (taken, or not allowed). */
export class ListenError extends Error {}

/**
 * Listens with `app` on host:port, exclusively unless `reusePort` (SO_REUSEPORT: processes sharing
 * the port on purpose); the listen socket, or a ListenError saying why not.
 */
export function listenOn(app: uWS.TemplatedApp, host: string, port: number, reusePort: boolean): Promise<uWS.us_listen_socket> {
  return new Promise((resolve, reject) => {
    // listen(host, port, options, cb): the binding takes the options between the port and the callback (not in its typings).
    const listen = app.listen as unknown as (host: string, port: number, options: number, cb: (socket: uWS.us_listen_socket | false) => void) => void;
    listen.call(app, host, port, reusePort ? 0 : LISTEN_EXCLUSIVE_PORT, (socket) => {
      if (socket) resolve(socket);
      else reject(new ListenError(portTakenMessage(host, port, reusePort)));
    });
  });
}

/** The port a listen socket took (the one the system chose for port 0). */
export function listenedPort(socket: uWS.us_listen_socket): number {
  return uWS.us_socket_local_port(socket as unknown as uWS.us_socket);
}
