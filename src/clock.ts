/**
 * The one source of "now" (DESIGN: Time). Production reads the system clock; with
 * LAUREL_CLOCK=manual the time only moves when POST /admin/v1/clock sets it, which is how the
 * tests cross days, DST changes and months without sleeping, and how an operator simulates.
 */
export interface Clock {
  now(): number;
  readonly manual: boolean;
}

export class SystemClock implements Clock {
  readonly manual = false;
  now(): number {
    return Date.now();
  }
}

type Listener = (now: number, previous: number) => Promise<void> | void;

export class ManualClock implements Clock {
  readonly manual = true;
  private current: number;
  private readonly listeners: Listener[] = [];

  constructor(start = Date.now()) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  /** Moves the clock, then runs the work that became due (listeners) and waits for it. */
  async set(ms: number): Promise<void> {
    const previous = this.current;
    this.current = ms;
    for (const listener of this.listeners) await listener(ms, previous);
  }

  /** Called after every set; background work that is due by the service clock subscribes here. */
  onChange(listener: Listener): void {
    this.listeners.push(listener);
  }
}
