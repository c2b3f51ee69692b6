/**
 * The time seam of every state machine (election, epoch sync, tunnel
 * liveness). Production code gets `systemClock`; tests get `ManualClock`
 * from `@switchyard/clock/testing` and advance time without sleeping.
 */
export interface Clock {
  /** Milliseconds since the epoch; monotonic enough for leases on one host. */
  now(): number;
  /** Runs `fn` after `delayMs`. The returned timer never keeps the process alive. */
  setTimeout(fn: () => void, delayMs: number): Timer;
}

export interface Timer {
  cancel(): void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout(fn, delayMs) {
    const handle = setTimeout(fn, delayMs);
    handle.unref();
    return { cancel: () => clearTimeout(handle) };
  },
};

/** Resolves after `delayMs` on `clock`, or rejects with the signal's reason when aborted. */
export function sleep(clock: Clock, delayMs: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = (): void => {
      timer.cancel();
      reject(signal!.reason);
    };
    const timer = clock.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, delayMs);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export { Throttle } from './throttle.ts';
