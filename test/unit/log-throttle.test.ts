import { EventEmitter } from "node:events";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { LogThrottle, logQueueErrors } from "../../src/log-throttle.js";

describe("LogThrottle", () => {
  it("writes the first failure, holds the rest inside its window, and counts them for the next line", () => {
    const written: number[] = [];
    const throttle = new LogThrottle(3_600_000);
    for (let i = 0; i < 5; i++) throttle.run((unlogged) => written.push(unlogged));
    expect(written).toEqual([0]);
  });

  it("writes again once its window has passed since the last line written, with the count held back meanwhile", () => {
    let now = 1_000_000;
    const written: Array<[at: number, unlogged: number]> = [];
    const throttle = new LogThrottle(1000, () => now);
    const call = (at: number) => {
      now = at;
      throttle.run((unlogged) => written.push([at, unlogged]));
    };
    // Written at 1 000 000; held at +10, +20 and +999 (inside the window); written at +1000 with
    // those 3; its window then runs from there: held at +1500, written at +2000 with 1.
    for (const at of [0, 10, 20, 999, 1000, 1500, 2000]) call(1_000_000 + at);
    expect(written).toEqual([
      [1_000_000, 0],
      [1_001_000, 3],
      [1_002_000, 1],
    ]);
  });

  it("with no window writes every call, each reporting none held back", () => {
    const written: number[] = [];
    const throttle = new LogThrottle(0);
    for (let i = 0; i < 3; i++) throttle.run((unlogged) => written.push(unlogged));
    expect(written).toEqual([0, 0, 0]);
  });
});

describe("logQueueErrors", () => {
  it("turns a burst of a queue's errors into one warning in the log", () => {
    const lines: Array<{ level: number; queue: string; msg: string; err: string }> = [];
    const logger = pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) });
    const queue = new EventEmitter();
    logQueueErrors(queue, logger, "laurel-time-demo");
    for (let i = 0; i < 20; i++) queue.emit("error", new Error("connect ECONNREFUSED 127.0.0.1:6379"));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 40, queue: "laurel-time-demo", err: "connect ECONNREFUSED 127.0.0.1:6379" });
  });
});
