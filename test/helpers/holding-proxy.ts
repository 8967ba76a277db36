import { createServer, connect, type Server, type Socket } from "node:net";
import { portOutsideEphemeralRange } from "./ports.js";
import { runService, waitFor, type ServiceProcess } from "./service-process.js";

/**
 * A TCP proxy in front of a Redis whose connections a test can drop at an exact point: `hold()`
 * keeps what clients send from then on (Redis never sees it: a command "on the wire" whose
 * reply never comes), `cut()` closes every connection and refuses new ones (a Redis that is
 * gone), `open()` forwards again. What was held is readable, so that a test waits until a
 * command was written instead of guessing when.
 */
export class HoldingProxy {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private state: "forward" | "hold" | "refuse" = "forward";
  private heldText = "";
  /** Connections refused since the last cut(): a client trying again, so it saw the drop. */
  refused = 0;

  constructor(private readonly upstreamPort: number) {
    this.server = createServer((client) => {
      client.on("error", () => undefined);
      if (this.state === "refuse") {
        this.refused++;
        client.destroy();
        return;
      }
      const upstream = connect(this.upstreamPort, "127.0.0.1");
      upstream.on("error", () => undefined);
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on("close", () => {
          this.sockets.delete(socket);
          client.destroy();
          upstream.destroy();
        });
      }
      client.on("data", (bytes: Buffer) => {
        if (this.state === "forward") upstream.write(bytes);
        else this.heldText += bytes.toString("latin1");
      });
      upstream.on("data", (bytes: Buffer) => client.write(bytes));
    });
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    return `redis://127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }

  /** From now on, what clients send is kept here, not forwarded. */
  hold(): void {
    this.state = "hold";
    this.heldText = "";
  }

  /** Everything held since hold(), as text. */
  held(): string {
    return this.heldText;
  }

  /** Closes every connection and refuses new ones until open(). */
  cut(): void {
    this.state = "refuse";
    this.refused = 0;
    for (const socket of this.sockets) socket.destroy();
  }

  /** Forwards again, to connections made from now on. */
  open(): void {
    this.state = "forward";
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/**
 * The built service (`env` added to its environment; its stream worker and webhook consumer off)
 * on a proxy of its own to the Redis at `redisUrl`, started and answering. The proxy and the
 * process are added to `owned`, for the test file's afterAll to stop.
 */
export async function serviceBehindProxy(
  redisUrl: string,
  env: Record<string, string>,
  owned: { proxies: HoldingProxy[]; processes: ServiceProcess[] },
): Promise<{ port: number; proxy: HoldingProxy; proc: ServiceProcess }> {
  const proxy = new HoldingProxy(Number(new URL(redisUrl).port));
  owned.proxies.push(proxy);
  const port = await portOutsideEphemeralRange();
  const proc = runService({ REDIS_URL: await proxy.listen(), PORT: String(port), LAUREL_WORKER: "off", ...env });
  owned.processes.push(proc);
  await waitFor(() => proc.output().includes("laurel listening"), "the service to start", proc.exited, proc.output);
  return { port, proxy, proc };
}
