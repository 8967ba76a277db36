/**
 * A deadline for an answer over the network that a late process does not miss by its own
 * lateness. Past `ms`, `action` runs one turn of the event loop later: timers run before the poll
 * phase reads sockets, so a process that did not run meanwhile (a loaded host, a long GC) found
 * its timer due before it read an answer that had arrived in time. /healthz then said Redis was
 * down with its PONG waiting on the socket, and a webhook attempt cut a 2xx and delivered the
 * event again. Cancel once answered.
 */
export function deadline(ms: number, action: () => void): { cancel(): void } {
  let late: NodeJS.Immediate | undefined;
  const timer = setTimeout(() => (late = setImmediate(action)), ms);
  return {
    cancel() {
      clearTimeout(timer);
      clearImmediate(late);
    },
  };
}

/**
 * `action` every `ms`, each run a turn after its timer (deadline's reason: what arrived while
 * the process did not run is read first). Unref'd: it keeps no process alive. Stop with cancel().
 */
export function everyAfterReads(ms: number, action: () => void): { cancel(): void } {
  let late: NodeJS.Immediate | undefined;
  const timer = setInterval(() => {
    late ??= setImmediate(() => {
      late = undefined;
      action();
    });
  }, ms);
  timer.unref();
  return {
    cancel() {
      clearInterval(timer);
      clearImmediate(late);
    },
  };
}

/** `answer`, or a rejection when it has not come within `ms` (the deadline above: an answer that arrived in time is read first; /healthz, the start's wait for Redis). */
export function answeredWithin<T>(answer: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = deadline(ms, () => reject(new Error(`no answer within ${ms} ms`)));
    answer.then(
      (value) => {
        timer.cancel();
        resolve(value);
      },
      (err: unknown) => {
        timer.cancel();
        reject(err);
      },
    );
  });
}
