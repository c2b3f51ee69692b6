/**
 * The time seam of every state machine (election, epoch sync, tunnel
 * liveness). Production code gets `systemClock`; tests get `ManualClock`
 * from `@switchyard/clock/testing` and advance time without sleeping.
 */
export interface Clock {
  /**
   * Wall-clock milliseconds since the Unix epoch. NTP or an operator may step
   * it either way: use it for timestamps written for others (a Lease's
   * renewTime, a generation), never to measure how long something took.
   */
  now(): number;
  /**
   * Milliseconds from an arbitrary origin that only moves forward, at the
   * rate of real time, whatever is done to the wall clock. Measure every
   * duration, deadline and expiry with it; compare readings of one process
   * only (the origin differs between processes).
   */
  monotonicNow(): number;
  /** Runs `fn` after `delayMs`. The returned timer never keeps the process alive. */
  setTimeout(fn: () => void, delayMs: number): Timer;
}

export interface Timer {
  cancel(): void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  monotonicNow: () => performance.now(),
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
export { Heartbeat } from './heartbeat.ts';
export type { HeartbeatOptions } from './heartbeat.ts';
