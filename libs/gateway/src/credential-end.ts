import type { Clock, Timer } from '@switchyard/clock';
import { TIMER_DELAY_MS_MAX } from '@switchyard/service';

/**
 * Calls `end` once `clock`'s wall time reaches `atMs` (a token's expiry is
 * a wall time); returns what cancels it. Never synchronously, even for a
 * time already past. Timers run on elapsed time, so the wall clock is read
 * again when one fires: a delay past what a timer holds (24.8 days; a
 * longer one would fire at once) is waited out in parts, and so is a wall
 * clock set back meanwhile. Not guaranteed: a wall clock set forward ends
 * the request late by as much.
 */
export function endAtWallTime(clock: Clock, atMs: number, end: () => void): () => void {
  let timer: Timer | undefined;
  const arm = (leftMs: number): void => {
    timer = clock.setTimeout(check, Math.min(Math.max(leftMs, 0), TIMER_DELAY_MS_MAX));
  };
  const check = (): void => {
    const leftMs = atMs - clock.now();
    if (leftMs > 0) return arm(leftMs);
    timer = undefined;
    end();
  };
  arm(atMs - clock.now());
  return () => timer?.cancel();
}
