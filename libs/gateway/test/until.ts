import assert from 'node:assert/strict';

/** Waits in real time, polling every few milliseconds, until `check` holds; fails after `timeoutMs`. */
export async function until(check: () => boolean, what = 'the condition', timeoutMs = 5000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!check()) {
    assert.ok(performance.now() < deadline, `timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
