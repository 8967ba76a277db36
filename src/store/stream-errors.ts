import { Redis, SentinelConnector } from "ioredis";

/** The sockets keepStreamErrorsHeard gave a listener, and its own listeners (not copied by quietDuplicate). */
const heardStreams = new WeakSet<object>();
const streamGuards = new WeakSet<object>();

/**
 * For every client the process makes, once: each socket of the client keeps an "error" listener
 * for the rest of its life. ioredis listens for a socket's first
 * error only (`stream.once("error")`, its connectors' and its own), and a TLS socket can emit
 * two: a server's alert (a client certificate refused after a TLS 1.3 handshake), then the reset
 * that follows it (`read ECONNRESET`). The second had no listener and ended the process as an
 * uncaught exception (seen under load: the start that should have said "requires a TLS client
 * certificate" crashed instead). ioredis has the first error and the close; the later ones of the
 * same socket are dropped.
 *
 * The listener is added when the socket connects (the client's "connect") or, for one that fails
 * before, while ioredis passes its first error on (the client's "error", emitted from that
 * error's own emit): once a connection, nothing on a command's path, and nothing defined on a
 * client ioredis owns (the first form of this was a `stream` accessor on the client). One call per
 * client, from the places that make one (each call adds its listeners): createRedisClient,
 * quietDuplicate, BullMQ's client factory (redis-client.ts), and the sentinel connector below.
 */
export function keepStreamErrorsHeard(redis: Redis): void {
  const guard = (): void => {
    const stream = redis.stream;
    if (!stream || typeof stream.on !== "function" || heardStreams.has(stream)) return;
    heardStreams.add(stream);
    stream.on("error", () => undefined);
  };
  streamGuards.add(guard);
  redis.on("connect", guard);
  redis.on("error", guard);
}

/** Whether a client's listener is keepStreamErrorsHeard's own (a copy of the client makes its own). */
export function isStreamGuard(listener: unknown): boolean {
  return typeof listener === "function" && streamGuards.has(listener);
}

type SentinelClientMaker = (endpoint: unknown, options?: unknown) => Redis;

/**
 * ioredis' SentinelConnector, with the clients it makes to ask the sentinels (one a connection to
 * the primary, to resolve its address; those of its failover detector when that is on) hearing
 * their sockets' later errors as the process's own clients do (keepStreamErrorsHeard). ioredis
 * makes them inside the connector, out of reach of the client's listeners: a sentinel over TLS
 * refusing the client certificate (an alert, then the reset) ended the process (seen once in
 * 30 loaded starts through sentinels over TLS). Given as the client's `Connector` option
 * (sentinelOptions), which ioredis offers for a connector of one's own.
 *
 * connectToSentinel is private in ioredis' types, so it is wrapped on the instance, not
 * overridden. Without it (a later ioredis), the connector is ioredis' own, unchanged; the test
 * (first-connection-order.test.ts) says so by failing.
 *
 * Unlike ioredis' own use of its connector, this one's `emitter` stays null: the client gets no
 * "sentinelReconnecting" or "failoverSubscribed", which only the failover detector emits (off
 * here) and nothing of Laurel listens for. "sentinelError", which Laurel does hear, comes
 * through connect()'s own argument, as before.
 */
export class SentinelConnectorHearingErrors extends SentinelConnector {
  // `unknown`, as ioredis' ConnectorConstructor gives it: the client's options, sentinels among them.
  constructor(options: unknown) {
    super(options as ConstructorParameters<typeof SentinelConnector>[0]);
    const self = this as unknown as { connectToSentinel?: SentinelClientMaker };
    const make = self.connectToSentinel;
    if (typeof make !== "function") return;
    self.connectToSentinel = (endpoint, options) => {
      const client = make.call(this, endpoint, options);
      keepStreamErrorsHeard(client);
      return client;
    };
  }
}
