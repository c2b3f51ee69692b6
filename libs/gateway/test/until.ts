import assert from 'node:assert/strict';

/** Waits in real time, polling every few milliseconds, until `check` holds; fails after `timeoutMs`. */
export async function until(check: () => boolean, what = 'the condition', timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Settles as `promise` does, or once `timeoutMs` has passed rejects with `what` (said as a failure). */
export async function within<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} (waited ${timeoutMs} ms)`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}
