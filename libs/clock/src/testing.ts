// For tests (`@switchyard/clock/testing`): the manual clock, and a real-time
// bound on a wait, so that no test waits for ever on an event that never comes.
export { ManualClock, flushMicrotasks } from './manual.ts';

/** Settles as `promise` does, or once `ms` have passed rejects with `what` (said as a failure). */
export async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} (waited ${ms} ms)`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}
