// A runtime holds only a join token, yet `/api/proxy/<its id>/…` serves its
// answers from the scheduler's origin, the live page's. An operator's browser
// that signed in to `/ui` sends its API token (Basic) to every path there: a
// page the runtime serves must not run script with those rights, nor leave
// state (a cookie) on that origin. Headless Chromium, a replica with API
// tokens, a runtime answering with HTML.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { launchChromium, skipWithoutChromium } from './browser.ts';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { dialTunnel, type TunnelDialer } from '@switchyard/tunnel';
import { IN_PROCESS_TOKEN } from '../support/inprocess.ts';
import { startReplicas, until } from './cluster.ts';

const skip = skipWithoutChromium;
if (skip) console.log(`# skipping the proxied page origin test: ${skip}`);
const API_TOKEN = 'api-token-0123456789abcdef';
// The script reads the API with the browser's credentials, as an attacker's would, and shows what it got.
const HOSTILE_PAGE =
  '<!doctype html><title>hostile</title><p id="marker">served by the runtime</p>' +
  "<script>fetch('/api/epoch').then((r) => r.json()).then((e) => (document.title = 'read epoch ' + e.epoch));</script>";

describe('a runtime-served page under the scheduler origin', { skip }, () => {
  let replicas: SchedulerReplica[] = [];
  let hostile: TunnelDialer | undefined;
  let browser: Browser | undefined;
  /** The Cookie header of each request for its page the hostile runtime was sent (the replica reads /watch too). */
  const cookiesSeen: (string | undefined)[] = [];

  before(async () => {
    replicas = await startReplicas(1, { apiTokens: () => [API_TOKEN] });
    hostile = dialTunnel({
      url: replicas[0]!.url,
      token: IN_PROCESS_TOKEN,
      // The runtime's own policy would let its inline script run; the scheduler's must win.
      info: { id: 'rt-hostile', classes: ['demo'], metadata: {}, version: '1.0.0', limits: {} },
      handler: (req, res) => {
        if (req.url === '/page') cookiesSeen.push(req.headers.cookie);
        res.writeHead(200, {
          'content-type': 'text/html; charset=utf-8',
          'content-security-policy': "script-src 'unsafe-inline' 'self'",
          // Would ride along with every later request of the browser to the scheduler origin.
          'set-cookie': 'operator=runtime-chosen; Path=/; Max-Age=3600',
        });
        res.end(HOSTILE_PAGE);
      },
    });
    await until('the hostile runtime connected', () => hostile!.connected);
    browser = await launchChromium();
  });

  after(async () => {
    await browser?.close();
    await hostile?.close();
    await Promise.allSettled(replicas.map((r) => r.close()));
  });

  it('renders inert: no script of the runtime runs with the operator credentials', async () => {
    const context = await browser!.newContext({ httpCredentials: { username: 'operator', password: API_TOKEN } });
    try {
      const page = await context.newPage();
      const live = await page.goto(`${replicas[0]!.url}/ui`);
      assert.equal(live?.status(), 200, 'the operator is signed in to the live page');
      const answer = await page.goto(`${replicas[0]!.url}/api/proxy/rt-hostile/page`);
      assert.equal(answer?.status(), 200);
      assert.equal(await page.locator('#marker').innerText(), 'served by the runtime');
      // The script would set the title within a round trip; give it ample time, then look.
      await page.waitForLoadState('networkidle');
      assert.equal(await page.title(), 'hostile', 'the runtime script ran on the scheduler origin');
      assert.equal(answer!.headers()['x-content-type-options'], 'nosniff');
    } finally {
      await context.close();
    }
  });

  it('sets no cookie on the scheduler origin', async () => {
    const context = await browser!.newContext({ httpCredentials: { username: 'operator', password: API_TOKEN } });
    try {
      const page = await context.newPage();
      // Signed in to the live page first: the browser sends its credentials on the origin's other paths then.
      assert.equal((await page.goto(`${replicas[0]!.url}/ui`))?.status(), 200);
      const answer = await page.goto(`${replicas[0]!.url}/api/proxy/rt-hostile/page`);
      assert.equal(answer?.status(), 200);
      assert.equal(await page.locator('#marker').innerText(), 'served by the runtime');
      assert.deepEqual(await context.cookies(replicas[0]!.url), []);
    } finally {
      await context.close();
    }
  });

  it("passes none of the origin's cookies to the runtime", async () => {
    const context = await browser!.newContext({ httpCredentials: { username: 'operator', password: API_TOKEN } });
    try {
      // A session a sign-in proxy in front of the live page (or another host of the site) keeps in a cookie.
      await context.addCookies([{ name: 'sso-session', value: 'operator-0123456789', url: replicas[0]!.url }]);
      const page = await context.newPage();
      assert.equal((await page.goto(`${replicas[0]!.url}/ui`))?.status(), 200);
      cookiesSeen.length = 0;
      const answer = await page.goto(`${replicas[0]!.url}/api/proxy/rt-hostile/page`);
      assert.equal(answer?.status(), 200);
      assert.match((await answer!.request().allHeaders()).cookie ?? '', /sso-session=/, 'the browser sent the cookie');
      assert.deepEqual(cookiesSeen, [undefined]);
    } finally {
      await context.close();
    }
  });
});
