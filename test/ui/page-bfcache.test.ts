// The live page in headless Chromium with the back/forward cache on, as in a
// user's browser: the page closes its state stream on 'pagehide' (a cached
// page must not hold a viewer slot). Shown again from the cache it gets no
// new load, only a 'pageshow' with `persisted`: it must open the stream again
// and follow the cluster, and not claim to be live before it has.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { launchChromium, skipWithoutChromium } from './browser.ts';
import type { RuntimeNode } from '@switchyard/runtime';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { startReplicas, startRuntime, until } from './cluster.ts';
import { SseStream } from './sse.ts';

const skip = skipWithoutChromium;
if (skip) console.log(`# skipping the live page back/forward cache test: ${skip}`);
/** The replica's default cap on `/ui/events` subscribers. */
const SUBSCRIBERS_MAX = 32;

/** One 'pageshow' of the live page's document. */
interface Show {
  persisted: boolean;
  pill: string;
}

describe('live page shown again from the back/forward cache', { skip }, () => {
  let replicas: SchedulerReplica[] = [];
  const runtimes: RuntimeNode[] = [];
  let browser: Browser | undefined;
  const held: SseStream[] = [];

  before(async () => {
    replicas = await startReplicas(1);
    runtimes.push(await startRuntime('rt-1', replicas[0]!.url));
    browser = await launchChromium({ backForwardCache: true });
  });

  after(async () => {
    for (const s of held) s.close();
    await browser?.close();
    await Promise.allSettled(runtimes.map((r) => r.close()));
    await Promise.allSettled(replicas.map((r) => r.close()));
  });

  /** Takes every viewer slot; the page's own stream, closed on 'pagehide', may take a moment to free its slot. */
  async function takeEverySlot(url: string): Promise<void> {
    while (held.length < SUBSCRIBERS_MAX) {
      const stream = await until('a free viewer slot', async () => {
        const s = await SseStream.open(`${url}/ui/events`);
        if (s.status === 200) return s;
        s.close();
        return undefined;
      });
      held.push(stream);
    }
  }

  it('opens its state stream again and follows the cluster, not live until the stream is open', async () => {
    const url = replicas[0]!.url;
    const context = await browser!.newContext();
    try {
      const page = await context.newPage();
      // Whether each document of the tab was shown from the cache (a reload would make this test prove nothing),
      // and what its pill said the moment it was shown, before any handler of the page's ran.
      await page.addInitScript(() => {
        const shows: Show[] = [];
        (window as unknown as { shows: Show[] }).shows = shows;
        window.addEventListener('pageshow', (event) =>
          shows.push({ persisted: event.persisted, pill: document.getElementById('connection')?.textContent ?? '' }),
        );
      });
      await page.goto(`${url}/ui`);
      await page.locator('#connection', { hasText: 'live' }).waitFor({ timeout: 5000 });
      await page.locator('#runtimes tr[data-runtime="rt-1"]').waitFor({ timeout: 5000 });

      // Away: the cluster changes, and every viewer slot is taken, so the stream the page opens again is refused.
      await page.goto(`${url}/api/epoch`);
      await takeEverySlot(url);
      runtimes.push(await startRuntime('rt-2', url));

      const reopened = page.waitForResponse((r) => r.url().endsWith('/ui/events'), { timeout: 5000 });
      // Awaited below; a failure before then must not be reported as this wait's rejection when the context closes.
      reopened.catch(() => {});
      await page.goBack({ waitUntil: 'commit' });
      const shown = await until('the page shown again from the back/forward cache (a pageshow with persisted)', () =>
        page.evaluate(() => (window as unknown as { shows?: Show[] }).shows?.find((s) => s.persisted)),
      );
      assert.notEqual(shown.pill, 'live', 'the page claimed to be live with its stream closed');
      assert.equal((await reopened).status(), 503);
      await page.locator('#connection', { hasText: /retrying/ }).waitFor({ timeout: 5000 });
      assert.equal(await page.locator('#runtimes tr[data-runtime="rt-2"]').count(), 0, 'no state without a stream');

      for (const s of held.splice(0)) s.close();
      await page.locator('#connection', { hasText: 'live' }).waitFor({ timeout: 15_000 });
      await page.locator('#runtimes tr[data-runtime="rt-2"]').waitFor({ timeout: 5000 });
    } finally {
      await context.close();
    }
  });
});
