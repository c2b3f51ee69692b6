// A request is admitted on a credential, but an event stream (a session's
// GET stream) or a long answer (a tool call streaming its progress) can
// outlive it by hours. The gateway ends what a credential let in when it
// ends: a bearer token removed from its list within a check interval, a JWT
// at its `exp` (plus the clock tolerance verification allows). Real
// runtimes on loopback; the gateway runs on a manual clock, which the test
// moves. Each stream is a raw GET, each long call a real 2026-07-28 client's.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock, within } from '@switchyard/clock/testing';
import { REVOCATION_CHECK_MS, TIMER_DELAY_MS_MAX } from '@switchyard/service';
import type { GatewayOptions } from '@switchyard/gateway';
import { endAtWallTime } from '../src/credential-end.ts';
import { AUDIENCE, ISSUER } from './fixtures/jwks.ts';
import { jwtHarness } from './fixtures/jwt-harness.ts';
import { INITIALIZE, connectV2, post, startHarness, type Harness } from './harness.ts';
import { until } from './until.ts';

const OLD = 'client-token-old-0123456789';
const NEW = 'client-token-new-0123456789';
const LEGACY = '2025-06-18';
/** The skew verification allows past a JWT's `exp` (GATEWAY_DEFAULTS.jwtClockToleranceMs). */
const JWT_TOLERANCE_MS = 60_000;
/** How long a stream that should end may take: far more than a loopback round trip. */
const ENDS_WITHIN_MS = 5000;

const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });

/** A legacy session initialized with `token`, and its id. */
async function session(url: string, token: string): Promise<string> {
  const res = await post(url, INITIALIZE, bearer(token));
  assert.equal(res.status, 200);
  const id = res.headers.get('mcp-session-id')!;
  const headers = { ...bearer(token), 'mcp-session-id': id, 'mcp-protocol-version': LEGACY };
  assert.equal((await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, headers)).status, 202);
  return id;
}

/** A session's event stream, opened with `token`: read it with `nextEvent` or `ended`. */
interface EventStream {
  nextEvent(): Promise<string>;
  ended(): Promise<'ended' | 'cut'>;
  close(): Promise<void>;
}

async function openStream(url: string, token: string, id: string): Promise<EventStream> {
  const res = await fetch(url, {
    headers: { ...bearer(token), accept: 'text/event-stream', 'mcp-session-id': id, 'mcp-protocol-version': LEGACY },
  });
  assert.equal(res.status, 200);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  return {
    async nextEvent() {
      for (let reads = 0; reads < 100; reads++) {
        const data = /^data: (.*)$/m.exec(text);
        if (data) {
          text = text.slice(text.indexOf('\n\n', data.index) + 2);
          return data[1]!;
        }
        const { done, value } = await reader.read();
        if (done) throw new Error('the stream ended');
        text += decoder.decode(value, { stream: true });
      }
      throw new Error('no event in 100 reads');
    },
    async ended() {
      try {
        for (let reads = 0; reads < 1000; reads++) if ((await reader.read()).done) return 'ended';
        throw new Error('still reading after 1000 reads');
      } catch {
        return 'cut';
      }
    },
    close: () => reader.cancel().catch(() => {}),
  };
}

/** Whether `stream` is open: a notification sent now to every session reaches it (after those sent before). */
async function stillOpen(h: Harness, stream: EventStream, text: string): Promise<void> {
  await h.runtimes[0]!.notifyAll(text);
  const reached = (async () => {
    for (let events = 0; events < 10; events++) if ((await stream.nextEvent()).includes(text)) return true;
    return false;
  })();
  assert.ok(await within(reached, ENDS_WITHIN_MS, `"${text}" on the stream`));
}

/**
 * A 2026-07-28 client's `sleep` call presenting `headers`, once under way
 * on the runtime; `close` cancels it. (Wrapped: an async function returning
 * the call would wait for it.)
 */
async function longCall(
  h: Harness,
  headers: Record<string, string>,
): Promise<{ call: Promise<unknown>; close(): Promise<void> }> {
  const client = await connectV2(h.url, 'modern', headers);
  const running = h.runtimes[0]!.running.count;
  const call = client.callTool({ name: 'sleep', arguments: { ms: 600_000 } });
  call.catch(() => {});
  await until(() => h.runtimes[0]!.running.count > running, 'the call running on the runtime');
  return { call, close: () => client.close() };
}

/**
 * The gateway's options here: checks of held upstreams (`GET /healthz`)
 * run on the gateway's clock, and the test runtimes do not answer them,
 * so moving the clock would cut their connections.
 */
const quiet = { upstreamCheckIntervalMs: 0 };

describe('a gateway in bearer mode whose token list changes', () => {
  let h: Harness;
  let tokens: readonly string[] = [OLD, NEW];
  const clock = new ManualClock();
  const warnings: string[] = [];
  const logger: GatewayOptions['logger'] = {
    debug() {},
    info() {},
    error() {},
    warn: (fields: object, msg?: string) => void warnings.push(`${msg} ${JSON.stringify(fields)}`),
  };
  before(async () => {
    h = await startHarness(1, { ...quiet, auth: { mode: 'bearer', tokens: () => tokens }, clock, logger });
  });
  after(() => h.close());

  it('ends, within one check, the streams and calls a removed token let in, and only those', async () => {
    const oldStream = await openStream(h.url, OLD, await session(h.url, OLD));
    const newStream = await openStream(h.url, NEW, await session(h.url, NEW));
    const { call: oldCall } = await longCall(h, bearer(OLD));
    const newCall = await longCall(h, bearer(NEW));
    const cancelled = h.runtimes[0]!.cancelled.count;
    const openGets = h.runtimes[0]!.openGets.count;
    tokens = [NEW];
    await clock.advance(REVOCATION_CHECK_MS - 1);
    await stillOpen(h, oldStream, 'before-the-check');
    await clock.advance(1);
    assert.equal(await within(oldStream.ended(), ENDS_WITHIN_MS, 'the old stream ending'), 'ended');
    await assert.rejects(within(oldCall, ENDS_WITHIN_MS, 'the old call ending'));
    await until(() => h.runtimes[0]!.cancelled.count === cancelled + 1, 'the old call cancelled upstream');
    await until(() => h.runtimes[0]!.openGets.count === openGets - 1, 'the old stream closed upstream');
    await stillOpen(h, newStream, 'after-the-check');
    assert.equal(h.runtimes[0]!.running.count, 1, 'the call of the token kept goes on');
    assert.deepEqual(warnings, ['closed requests whose token was removed {"ended":2}']);
    assert.equal(warnings.join().includes(OLD), false, 'the token is never logged');
    tokens = [];
    await clock.advance(REVOCATION_CHECK_MS);
    await stillOpen(h, newStream, 'an-empty-list-ends-nothing');
    await newStream.close();
    await newCall.close();
  });

  it('leaves nothing behind of the requests that ended by themselves', async () => {
    tokens = [OLD];
    await until(() => h.gateway.stats().inFlight === 0 && h.gateway.stats().sseOpen === 0, 'every request over');
    await clock.advance(REVOCATION_CHECK_MS);
    const timers = clock.pendingTimers;
    for (let i = 0; i < 5; i++) assert.equal((await post(h.url, INITIALIZE, bearer(OLD))).status, 200);
    await clock.advance(REVOCATION_CHECK_MS);
    assert.equal(clock.pendingTimers, timers, 'no check armed for requests that are over');
  });
});

describe('a gateway in jwt mode', () => {
  // Starts at the time the fixture stamps tokens with (the system clock's): they are checked on this one.
  const startMs = Date.now();
  const clock = new ManualClock(startMs);
  const expiresAt = Math.floor(startMs / 1000) + 120;
  const h = jwtHarness({ issuer: ISSUER, audience: AUDIENCE }, { ...quiet, clock });

  it("ends the streams and calls a token let in at its exp, past the clock tolerance, and not a later token's", async () => {
    const early = await h.jwks.signWith({ exp: expiresAt });
    const late = await h.jwks.signWith({ exp: expiresAt + 3600 });
    const earlyStream = await openStream(h.url, early, await session(h.url, early));
    const lateStream = await openStream(h.url, late, await session(h.url, late));
    const { call: earlyCall } = await longCall(h, bearer(early));
    const cancelled = h.runtimes[0]!.cancelled.count;
    const openGets = h.runtimes[0]!.openGets.count;
    const endsAtMs = expiresAt * 1000 + JWT_TOLERANCE_MS;
    await clock.advance(endsAtMs - clock.now() - 1);
    await stillOpen(h, earlyStream, 'within-the-tolerance');
    await clock.advance(1);
    assert.equal(await within(earlyStream.ended(), ENDS_WITHIN_MS, 'the stream ending'), 'ended');
    await assert.rejects(within(earlyCall, ENDS_WITHIN_MS, 'the call ending'));
    await until(() => h.runtimes[0]!.cancelled.count === cancelled + 1, 'the call cancelled upstream');
    await until(() => h.runtimes[0]!.openGets.count === openGets - 1, 'the stream closed upstream');
    await stillOpen(h, lateStream, 'the-later-token');
    await lateStream.close();
  });

  it('leaves no timer behind of the requests that ended by themselves', async () => {
    const token = await h.jwks.signWith({ exp: Math.floor(clock.now() / 1000) + 3600 });
    await until(() => h.gateway.stats().inFlight === 0 && h.gateway.stats().sseOpen === 0, 'the earlier calls over');
    const timers = clock.pendingTimers;
    for (let i = 0; i < 5; i++) assert.equal((await post(h.url, INITIALIZE, bearer(token))).status, 200);
    assert.equal(clock.pendingTimers, timers);
  });
});

describe('endAtWallTime', () => {
  const DAY_MS = 86_400_000;

  it('waits out an expiry further off than a timer holds, and a wall clock set back', async () => {
    const clock = new ManualClock();
    const delays: number[] = [];
    // Node fires a timer of more than TIMER_DELAY_MS_MAX at once; the manual clock would not.
    const recording = {
      now: () => clock.now(),
      monotonicNow: () => clock.monotonicNow(),
      setTimeout: (fn: () => void, delayMs: number) => (delays.push(delayMs), clock.setTimeout(fn, delayMs)),
    };
    const ended: number[] = [];
    endAtWallTime(recording, clock.now() + 30 * DAY_MS, () => ended.push(clock.now()));
    await clock.advance(30 * DAY_MS - 1);
    assert.deepEqual(ended, []);
    assert.ok(Math.max(...delays) <= TIMER_DELAY_MS_MAX, `timers of ${delays.join(', ')} ms`);
    clock.stepWall(-DAY_MS);
    await clock.advance(1);
    assert.deepEqual(ended, [], 'the wall clock is a day behind');
    await clock.advance(DAY_MS);
    assert.deepEqual(ended, [clock.now()]);
  });

  it('ends a past expiry on the next turn, never in the call, and nothing once cancelled', async () => {
    const clock = new ManualClock();
    let ended = 0;
    endAtWallTime(clock, clock.now() - 1, () => ended++);
    assert.equal(ended, 0);
    await clock.advance(0);
    assert.equal(ended, 1);
    endAtWallTime(clock, clock.now() + 10, () => ended++)();
    await clock.advance(10);
    assert.equal(ended, 1);
    assert.equal(clock.pendingTimers, 0);
  });
});
