// The live page of a replica with API tokens, in headless Chromium: without
// credentials the browser gets the 401 and its Basic challenge (a person
// would be asked for the token; headless, Chromium gives up); with the token as the Basic password the page
// loads and its live state stream, which the browser opens with the same
// credentials, connects.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { launchChromium, skipWithoutChromium } from './browser.ts';
import type { RuntimeNode } from '@switchyard/runtime';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { startReplicas, startRuntime } from './cluster.ts';

const skip = skipWithoutChromium;
if (skip) console.log(`# skipping the live page browser test with API tokens: ${skip}`);
const API_TOKEN = 'api-token-0123456789abcdef';

describe('live page behind API tokens in a browser', { skip }, () => {
  let replicas: SchedulerReplica[] = [];
  let runtime: RuntimeNode | undefined;
  let browser: Browser | undefined;

  before(async () => {
    replicas = await startReplicas(1, { apiTokens: () => [API_TOKEN] });
    runtime = await startRuntime('rt-1', replicas[0]!.url);
    browser = await launchChromium();
  });

  after(async () => {
    await browser?.close();
    await runtime?.close();
    await Promise.allSettled(replicas.map((r) => r.close()));
  });

  it('answers a browser without credentials 401 with a Basic challenge', async () => {
    const context = await browser!.newContext();
    try {
      const page = await context.newPage();
      const answered = page.waitForResponse((r) => r.url().endsWith('/ui'));
      // Headless, there is nobody to ask: Chromium gives up on the challenge.
      await assert.rejects(page.goto(`${replicas[0]!.url}/ui`), /ERR_INVALID_AUTH_CREDENTIALS/);
      const answer = await answered;
      assert.equal(answer.status(), 401);
      assert.match((await answer.headerValue('www-authenticate')) ?? '', /^Basic realm="switchyard-scheduler"/);
    } finally {
      await context.close();
    }
  });

  it('shows the live page, state stream connected, to a browser with the token as its password', async () => {
    const context = await browser!.newContext({ httpCredentials: { username: 'operator', password: API_TOKEN } });
    try {
      const page = await context.newPage();
      const response = await page.goto(`${replicas[0]!.url}/ui`);
      assert.equal(response?.status(), 200);
      await page.locator('#connection', { hasText: 'live' }).waitFor({ timeout: 5000 });
      await page.locator('#runtimes tr[data-runtime="rt-1"]').waitFor({ timeout: 5000 });
      assert.equal(await page.locator('#replica').innerText(), 's0');
    } finally {
      await context.close();
    }
  });
});
