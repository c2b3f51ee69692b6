import assert from 'node:assert/strict';

/** Polls `check` on real time (these tests do real I/O) every 5 ms until it holds, or fails after `timeoutMs`. */
export async function pollUntil(check: () => boolean, what: string, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!check()) {
    if (performance.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
