// The live page in headless Chromium when its state stream is refused: an
// EventSource that gets an answer other than a 200 event stream (the
// replica's 503 for too many viewers, a 401 after a token change, a proxy's
// 502 while the replica restarts) gives up for good. The page must say so and
// open the stream again itself, rather than claim to be reconnecting forever.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { launchChromium, skipWithoutChromium } from './browser.ts';
import type { RuntimeNode } from '@switchyard/runtime';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { startReplicas, startRuntime } from './cluster.ts';
import { SseStream } from './sse.ts';

const skip = skipWithoutChromium;
if (skip) console.log(`# skipping the live page reconnect test: ${skip}`);
/** The replica's default cap on `/ui/events` subscribers. */
const SUBSCRIBERS_MAX = 32;

describe('live page whose state stream is refused', { skip }, () => {
  let replicas: SchedulerReplica[] = [];
  let runtime: RuntimeNode | undefined;
  let browser: Browser | undefined;
  const held: SseStream[] = [];

  before(async () => {
    replicas = await startReplicas(1);
    runtime = await startRuntime('rt-1', replicas[0]!.url);
    browser = await launchChromium();
  });

  after(async () => {
    for (const s of held) s.close();
    await browser?.close();
    await runtime?.close();
    await Promise.allSettled(replicas.map((r) => r.close()));
  });

  it('says it is retrying while every viewer slot is taken, and goes live once one frees up', async () => {
    const url = replicas[0]!.url;
    for (let i = 0; i < SUBSCRIBERS_MAX; i++) held.push(await SseStream.open(`${url}/ui/events`));
    assert.ok(held.every((s) => s.status === 200));
    const context = await browser!.newContext();
    try {
      const page = await context.newPage();
      const refused = page.waitForResponse((r) => r.url().endsWith('/ui/events'));
      await page.goto(`${url}/ui`);
      assert.equal((await refused).status(), 503);
      await page.locator('#connection', { hasText: /retrying/ }).waitFor({ timeout: 5000 });
      for (const s of held.splice(0)) s.close();
      // The page's next attempt finds a free slot: no reload, no user action.
      await page.locator('#connection', { hasText: 'live' }).waitFor({ timeout: 15_000 });
      await page.locator('#runtimes tr[data-runtime="rt-1"]').waitFor({ timeout: 5000 });
    } finally {
      await context.close();
    }
  });
});
