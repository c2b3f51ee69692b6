// The live page in headless Chromium against an in-process cluster: it
// renders the leader, term, epoch and runtimes that the API reports, follows
// runtimes joining and leaving without a reload, and loads nothing from
// another origin. A screenshot is kept under test-artifacts/ for review.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { CHROMIUM, CHROMIUM_ARGS, skipWithoutChromium } from './browser.ts';
import type { RuntimeNode } from '@switchyard/runtime';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { epochOf, runtimeIds, startReplicas, startRuntime, until } from './cluster.ts';

const skip = skipWithoutChromium;
if (skip) console.log(`# skipping the live page browser test: ${skip}`);
const ARTIFACTS = resolve(import.meta.dirname, '../../test-artifacts');

describe('live page in a browser', { skip }, () => {
  let replicas: SchedulerReplica[] = [];
  const runtimes = new Map<string, RuntimeNode>();
  let context: BrowserContext | undefined;
  let page: Page;
  let profile = '';
  const foreign: string[] = [];
  const pageErrors: string[] = [];

  before(async () => {
    replicas = await startReplicas(3);
    runtimes.set('rt-1', await startRuntime('rt-1', replicas[0]!.url));
    profile = mkdtempSync(join(tmpdir(), 'switchyard-ui-profile-'));
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', ...CHROMIUM_ARGS, '--disable-component-update', '--disable-sync'],
      viewport: { width: 1100, height: 640 },
    });
    page = context.pages()[0] ?? (await context.newPage());
    page.on('pageerror', (error) => pageErrors.push(error.message));
    page.on('request', (request) => {
      if (!request.url().startsWith(replicas[2]!.url)) foreign.push(request.url());
    });
  });

  after(async () => {
    await context?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    await Promise.allSettled([...runtimes.values()].map((r) => r.close()));
    await Promise.allSettled(replicas.map((r) => r.close()));
  });

  const text = (selector: string): Promise<string> => page.locator(selector).innerText();
  const shownRuntimes = (): Promise<string[]> =>
    page.locator('#runtimes tr').evaluateAll((rows) => rows.map((r) => (r as HTMLElement).dataset.runtime!).sort());

  it('shows the leader, term, epoch and runtimes the API reports', async () => {
    const url = replicas[2]!.url;
    await until('replica s2 to list rt-1', async () => (await runtimeIds(url)).includes('rt-1'));
    await page.goto(`${url}/ui`);
    await page.locator('#connection', { hasText: 'live' }).waitFor({ timeout: 5000 });
    await page.locator('#runtimes tr[data-runtime="rt-1"]').waitFor({ timeout: 5000 });
    // The page first: it is live, and an epoch committed between the two reads must not put it ahead of the API.
    const shown = Number(await text('#epoch'));
    const api = await epochOf(url);
    assert.equal(await text('#replica'), 's2');
    assert.equal(await text('#leader'), api.leader!.id);
    assert.equal(await text('#term'), String(api.term));
    assert.equal(await text('#role'), api.isLeader ? 'leader' : 'follower');
    assert.ok(Number.isInteger(shown) && shown >= 1 && shown <= api.epoch!, `page epoch ${shown}, API ${api.epoch}`);
    assert.deepEqual(await shownRuntimes(), await runtimeIds(url));
    assert.match(await text('#runtimes tr[data-runtime="rt-1"]'), /available\s+s0\s+demo/);
  });

  it('adds a row when a runtime joins and drops it when the runtime leaves, without a reload', async () => {
    const before = Number(await text('#epoch'));
    runtimes.set('rt-2', await startRuntime('rt-2', replicas[1]!.url));
    await page.locator('#runtimes tr[data-runtime="rt-2"]').waitFor({ timeout: 5000 });
    assert.deepEqual(await shownRuntimes(), ['rt-1', 'rt-2']);
    assert.ok(Number(await text('#epoch')) > before, 'the epoch shown moved on');
    assert.equal(await text('#count-runtimes'), '2');

    await runtimes.get('rt-1')!.close();
    runtimes.delete('rt-1');
    await page.locator('#runtimes tr[data-runtime="rt-1"]').waitFor({ state: 'detached', timeout: 5000 });
    assert.deepEqual(await shownRuntimes(), ['rt-2']);
    assert.deepEqual(await runtimeIds(replicas[2]!.url), ['rt-2']);
  });

  it('draws a load sparkline per runtime and lists recent epochs', async () => {
    await until('two points in the sparkline', () =>
      page
        .locator('#runtimes tr[data-runtime="rt-2"] polyline.idle')
        .getAttribute('points')
        .then((p) => (p ?? '').split(' ').length >= 2),
    );
    const epochs = await page.locator('#epochs li').allInnerTexts();
    assert.ok(epochs.length >= 2, `epochs listed: ${epochs.join(' | ')}`);
    assert.match(epochs[0]!, new RegExp(`^#${await text('#epoch')} · term \\d+`));
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'ui-live-page.png'), fullPage: true });
  });

  it('marks a draining runtime, which takes no new sandbox, apart from an available one', async () => {
    const row = page.locator('#runtimes tr[data-runtime="rt-2"]');
    assert.match(await row.innerText(), /^rt-2\s+available\s/);
    void runtimes.get('rt-2')!.drain();
    await row.locator('td.draining', { hasText: 'draining' }).waitFor({ timeout: 5000 });
    assert.match(await row.innerText(), /sandboxes=0/);
  });

  it('loads nothing from another origin and raises no script error', () => {
    assert.deepEqual(foreign, []);
    assert.deepEqual(pageErrors, []);
  });
});
