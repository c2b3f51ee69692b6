// Acceptance at the process level: a legacy GET event stream through the
// gateway, carried to the scheduler as an HTTP/2 stream, ends for its client
// when that scheduler goes silent (SIGSTOP: no reset, no FIN, as a host that
// vanished looks from the gateway), found by the gateway's HTTP/2 pings.
// While the scheduler answers them, a silent stream stays open. A stream its
// client leaves is let go by the runtime at once; a client that lost one to
// a host that vanished opens the next one at once; and one that sends many
// headers opens it as its requests are taken.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { freezableRelay } from '@switchyard/service/testing';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { until } from '../support/processes.ts';
import { post, rawLegacySession } from './support.ts';

/** As the suites' tunnel pings: shorter ones see stalls of a loaded 2-core machine as silence. */
const PING_INTERVAL_MS = 1000;

describe('gateway event streams to a scheduler that goes silent', () => {
  let cluster: TestCluster;
  before(async () => {
    cluster = await startCluster({
      schedulers: 1,
      runtimes: 1,
      tunnelPingIntervalMs: 1000,
      gatewayArgs: ['--event-stream-ping-interval-ms', String(PING_INTERVAL_MS)],
    });
    await cluster.waitForRuntimes(['r0'], 15_000);
  });
  after(() => cluster?.stop());

  /** Opens a legacy session by raw HTTP; resolves with the headers its later requests carry. */
  async function openSession(url: string): Promise<Record<string, string>> {
    const headers = await rawLegacySession(url);
    return headers;
  }

  /** Event streams the runtime is answering, from its own /metrics through its scheduler. */
  async function runtimeStreams(): Promise<number> {
    const text = await (await fetch(`${cluster.schedulerUrls()[0]}/api/proxy/r0/metrics`)).text();
    return Number(/^switchyard_runtime_event_streams (\d+)$/m.exec(text)?.[1]);
  }

  it('has the runtime let go at once of a GET stream its client left', async () => {
    const url = cluster.gatewayUrl();
    const headers = await openSession(url);
    const before = await runtimeStreams();
    for (const attempt of ['first', 'second', 'third']) {
      const left = new AbortController();
      const res = await fetch(url, { headers: { ...headers, accept: 'text/event-stream' }, signal: left.signal });
      assert.equal(res.status, 200, `${attempt} GET: ${res.status === 200 ? '' : await res.text()}`);
      assert.equal(await runtimeStreams(), before + 1, `${attempt} GET: the runtime answers it`);
      left.abort();
      // Through gateway, scheduler and tunnel; the SDK's keep-alive (15 s) would find it gone far later.
      await until(
        `${attempt} GET to be let go`,
        async () => ((await runtimeStreams()) === before ? true : undefined),
        5000,
      );
    }
  });

  it('lets a client whose host vanished with its GET stream open open the next one on a new connection (200, not 409)', async () => {
    // Neither the gateway nor the runtime can know for minutes that the first connection is gone (no FIN, no
    // RST): the newer stream takes the session's place.
    const url = cluster.gatewayUrl();
    const headers = await openSession(url);
    const relay = await freezableRelay(Number(new URL(url).port));
    const streams = [new AbortController(), new AbortController()];
    try {
      const vanishing = new URL(url);
      vanishing.port = String(relay.port);
      const first = await fetch(vanishing, {
        headers: { ...headers, accept: 'text/event-stream' },
        signal: streams[0]!.signal,
      });
      assert.equal(first.status, 200, first.status === 200 ? '' : await first.text());
      relay.freeze();
      const next = await fetch(url, {
        headers: { ...headers, accept: 'text/event-stream' },
        signal: streams[1]!.signal,
      });
      assert.equal(next.status, 200, next.status === 200 ? '' : await next.text());
    } finally {
      for (const s of streams) s.abort();
      relay.close();
    }
  });

  it('opens the event stream of a client that sends 300 headers, as its requests are taken', async () => {
    // Every HTTP/2 hop (gateway to scheduler, scheduler to runtime) once reset a stream past 128 header fields.
    const url = cluster.gatewayUrl();
    const headers = await openSession(url);
    const many: Record<string, string> = {};
    for (let i = 0; i < 300; i++) many[`x-client-${i}`] = 'v';
    const call = await post(url, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, { ...headers, ...many });
    assert.equal(call.status, 200, call.text);
    const left = new AbortController();
    const res = await fetch(url, {
      headers: { ...headers, ...many, accept: 'text/event-stream' },
      signal: left.signal,
    });
    assert.equal(res.status, 200, res.status === 200 ? '' : await res.text());
    left.abort();
  });

  it('keeps a silent stream while pings are answered, and ends it within a few pings once they are not', async () => {
    const url = cluster.gatewayUrl();
    const headers = await openSession(url);

    const res = await fetch(url, { headers: { ...headers, accept: 'text/event-stream' } });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
    const reader = res.body!.getReader();
    // Resolves when the stream ends for the client, however it ends.
    const ended = (async () => {
      try {
        while (!(await reader.read()).done);
      } catch {
        // A cut stream is an end too.
      }
      return performance.now();
    })();
    const early = await Promise.race([
      ended,
      new Promise<'open'>((r) => setTimeout(() => r('open'), 3 * PING_INTERVAL_MS)),
    ]);
    assert.equal(early, 'open', 'a stream whose scheduler answers its pings stays open');

    const scheduler = cluster.schedulers[0]!;
    scheduler.signal('SIGSTOP');
    const stoppedAt = performance.now();
    try {
      const endedAt = await Promise.race([
        ended,
        new Promise<number>((r) => setTimeout(() => r(-1), 10 * PING_INTERVAL_MS)),
      ]);
      assert.notEqual(endedAt, -1, 'the stream must end while the scheduler is stopped');
      const took = endedAt - stoppedAt;
      assert.ok(
        took <= 4 * PING_INTERVAL_MS,
        `ended ${took} ms after the scheduler stopped (pings every ${PING_INTERVAL_MS} ms)`,
      );
    } finally {
      scheduler.signal('SIGCONT');
    }
  });
});
