/**
 * The one source of "now" (DESIGN: Time). Production reads the system clock; with
 * LAUREL_CLOCK=manual the time only moves when POST /admin/v1/clock sets it, which is how the
 * tests cross days, DST changes and months without sleeping, and how an operator simulates.
 */
export interface Clock {
  now(): number;
  /**
   * The latest time this clock has shown (a manual clock can be set back; a system clock can be
   * stepped back): whatever this process stamped with now() is stamped at or before it.
   */
  highest(): number;
  readonly manual: boolean;
}

export class SystemClock implements Clock {
  readonly manual = false;
  private latest = 0;

  /** `wall`: the system clock, in milliseconds (a test passes its own, to step it back). */
  constructor(private readonly wall: () => number = Date.now) {}

  now(): number {
    const now = this.wall();
    if (now > this.latest) this.latest = now;
    return now;
  }

  highest(): number {
    return Math.max(this.latest, this.wall());
  }
}

type Listener = (now: number, previous: number) => Promise<void> | void;

export class ManualClock implements Clock {
  readonly manual = true;
  private current: number;
  private latest: number;
  private readonly listeners: Listener[] = [];

  constructor(start = Date.now()) {
    this.current = start;
    this.latest = start;
  }

  now(): number {
    return this.current;
  }

  highest(): number {
    return this.latest;
  }

  /** Moves the clock, then runs the work that became due (listeners) and waits for it. */
  async set(ms: number): Promise<void> {
    const previous = this.current;
    this.current = ms;
    if (ms > this.latest) this.latest = ms;
    for (const listener of this.listeners) await listener(ms, previous);
  }

  /** Called after every set; background work that is due by the service clock subscribes here. */
  onChange(listener: Listener): void {
    this.listeners.push(listener);
  }
}
