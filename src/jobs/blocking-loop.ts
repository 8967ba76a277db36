import type { Redis } from "ioredis";
import type { Logger } from "pino";

/**
 * After a read that found less than a full batch, a loop waits this long before it reads again,
 * so that records gather into batches. Without it, under load a loop spun on a few records at a
 * time: each turn's fixed costs (the wait, a script call per moved shard, the trim) were paid for
 * a handful of records (with the wait, the stream worker's script calls fell from 0.118 to 0.038
 * per event under the webhooks bench; bench/README.md, "The stream worker in Redis"). The price
 * is up to this much more delay before a record reaches its buckets or its endpoints.
 */
export const GATHER_MS = 50;

export const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A background loop over the streams on its own Redis connection, as the stream worker and the
 * webhook consumer run one: each turn may block on that connection (XREAD / XREADGROUP BLOCK),
 * so stop() closes it, which ends a blocked read at once, and waits for the turn to return. A
 * turn that throws is logged and retried a second later (a Redis away, a lost group), after
 * `onError` has reset what the caller must check again.
 */
export class BlockingLoop {
  private connection: Redis | null = null;
  private loop: Promise<void> | null = null;
  private stopped = false;

  constructor(
    private readonly opts: {
      redis: Redis;
      logger: Logger;
      /** Logged with an error. */
      name: string;
      /** One turn: read (blocking on `blocking`), work, maybe pause. */
      turn: (blocking: Redis) => Promise<void>;
      onError?: () => void;
    },
  ) {}

  get stopping(): boolean {
    return this.stopped;
  }

  start(): void {
    if (this.loop) return;
    this.stopped = false;
    const blocking = this.opts.redis.duplicate();
    this.connection = blocking;
    this.loop = this.run(blocking);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.connection?.disconnect();
    await this.loop;
    this.loop = null;
    this.connection = null;
  }

  private async run(blocking: Redis): Promise<void> {
    while (!this.stopped) {
      try {
        await this.opts.turn(blocking);
      } catch (err) {
        if (this.stopped) break;
        this.opts.onError?.();
        this.opts.logger.error({ err }, `${this.opts.name}: read or work failed; retrying`);
        await pause(1000);
      }
    }
  }
}
