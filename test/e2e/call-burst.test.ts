// Acceptance at the process level: a burst of tool calls to one tunnelled
// runtime. The gateway sends calls through a scheduler on relay connections,
// each holding one of the runtime's tunnel streams for as long as it is kept
// alive, idle or not. Without a bound, a burst of N calls left N idle relays
// holding N streams for a minute, so that a large enough burst (the runtime
// takes 4,096) got later event streams refused. Here 300 calls in flight at
// once all succeed; at most 128 of them ride relays, the rest go through
// `/api/proxy` (whose streams end with each request), and after the burst the
// runtime's tunnel holds no more streams than those relays.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { LEGACY, initializeBody, metric, post, toolCallBody } from './support.ts';

const CALLS = 300;
/** The gateway's bound on relays per (scheduler, runtime). */
const RELAYS_MAX = 128;
/** Streams the scheduler keeps on a tunnel for its own use (watch, fetches). */
const CONTROL_STREAMS = 8;

describe('a burst of calls to one tunnelled runtime', () => {
  let cluster: TestCluster;
  before(async () => {
    cluster = await startCluster({
      schedulers: 1,
      runtimes: 1,
      gatewayArgs: ['--principal-concurrency-max', String(CALLS * 2)],
    });
    await cluster.waitForRuntimes(['r0'], 15_000);
  });
  after(() => cluster?.stop());

  it('succeeds call by call, and leaves no more tunnel streams held than the relays the gateway keeps', async () => {
    const url = cluster.gatewayUrl();
    const scheduler = cluster.schedulers[0]!.url!;
    const sessions = await Promise.all(
      Array.from({ length: 10 }, async (_, k) => {
        const identity = { 'mcp-protocol-version': LEGACY, 'x-switchyard-process': `burst-${k}` };
        const init = await post(url, initializeBody(), identity);
        assert.equal(init.status, 200, init.text);
        return { ...identity, 'mcp-session-id': init.headers.get('mcp-session-id')! };
      }),
    );
    const relaysBefore = await metric(scheduler, 'switchyard_scheduler_relay_connections_total');
    const proxiedBefore = await metric(scheduler, 'switchyard_scheduler_proxy_requests_total');

    // Each call sleeps long enough for all of them to be in flight together.
    const replies = await Promise.all(
      Array.from({ length: CALLS }, (_, n) =>
        post(url, toolCallBody(n + 2, 'sleep', { ms: 1500 }), sessions[n % sessions.length]!),
      ),
    );
    for (const reply of replies) {
      assert.equal(reply.status, 200, reply.text);
      assert.doesNotMatch(reply.text, /"error"/);
    }

    const relays = (await metric(scheduler, 'switchyard_scheduler_relay_connections_total')) - relaysBefore;
    const proxied = (await metric(scheduler, 'switchyard_scheduler_proxy_requests_total')) - proxiedBefore;
    assert.ok(relays > 0 && relays <= RELAYS_MAX, `relays asked for: ${relays}`);
    assert.ok(proxied >= CALLS - RELAYS_MAX, `calls through /api/proxy: ${proxied}`);
    const held = await metric(scheduler, 'switchyard_scheduler_tunnel_streams_busiest');
    assert.ok(held <= RELAYS_MAX + CONTROL_STREAMS, `streams still held on the runtime's tunnel: ${held}`);
  });
});
