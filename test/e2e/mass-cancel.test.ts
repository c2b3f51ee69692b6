// Acceptance at the process level: clients that leave all at once (a load
// balancer restarted, a client host gone) cancel their streams in a burst on
// the gateway's HTTP/2 connection to a scheduler and on the runtime's tunnel.
// HTTP/2 servers guard against "rapid reset" floods (CVE-2023-44487) by
// closing a connection that resets more than about a thousand streams at once;
// on these internal hops that closed every other session's streams with it.
// Here 1,200 GET event streams are dropped together while another session's
// tool call is in flight and its own event stream is held: both must live on,
// and the runtime's tunnel must not be dialled again.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Pool } from 'undici';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { LEGACY, initializeBody, post, toolCallBody } from './support.ts';

/** More than nghttp2's default reset burst (1,000). */
const STREAMS = 1200;
const PARALLEL = 100;

describe('clients that leave all at once', () => {
  let cluster: TestCluster;
  before(async () => {
    cluster = await startCluster({
      schedulers: 1,
      runtimes: 1,
      gatewayArgs: ['--principal-concurrency-max', String(STREAMS * 2)],
    });
    await cluster.waitForRuntimes(['r0'], 15_000);
  });
  after(() => cluster?.stop());

  /** Opens a legacy session of `process` (sessions of one process share its sandbox). */
  async function openSession(url: string, process: string): Promise<Record<string, string>> {
    const identity = { 'mcp-protocol-version': LEGACY, 'x-switchyard-process': process };
    const init = await post(url, initializeBody(), identity);
    assert.equal(init.status, 200, init.text);
    return { ...identity, 'mcp-session-id': init.headers.get('mcp-session-id')! };
  }

  it('cancel their streams without closing the connections other sessions share', async () => {
    const url = cluster.gatewayUrl();
    const { origin, pathname } = new URL(url);

    // The session that stays: an event stream held open and, later, a tool call in flight.
    const stays = await openSession(url, 'stays');
    const held = await fetch(url, { headers: { ...stays, accept: 'text/event-stream' } });
    assert.equal(held.status, 200);
    let heldEnded = false;
    void held.body!.pipeTo(new WritableStream()).then(
      () => (heldEnded = true),
      () => (heldEnded = true),
    );

    // The sessions that leave, each holding its event stream on its own connection.
    const pool = new Pool(origin, { connections: STREAMS + PARALLEL });
    try {
      for (let from = 0; from < STREAMS; from += PARALLEL) {
        await Promise.all(
          Array.from({ length: PARALLEL }, async (_, k) => {
            const headers = await openSession(url, `leaves-${k % 10}`);
            const res = await pool.request({
              path: pathname,
              method: 'GET',
              headers: { ...headers, accept: 'text/event-stream' },
            });
            assert.equal(res.statusCode, 200, `GET stream: ${res.statusCode}`);
            res.body.on('error', () => undefined);
          }),
        );
      }
      const call = post(url, toolCallBody(2, 'sleep', { ms: 3000 }), stays);
      await new Promise((r) => setTimeout(r, 500));
      await pool.destroy();

      const reply = await call;
      assert.equal(reply.status, 200, reply.text);
      assert.doesNotMatch(reply.text, /"error"/, 'the call in flight completes');
      assert.equal(heldEnded, false, "the held session's event stream is still open");
      const runtime = cluster.runtimes[0]!;
      const dropped = runtime.logs.find((line) => line.msg === 'tunnel disconnected');
      assert.equal(dropped, undefined, `the runtime's tunnel stayed up: ${JSON.stringify(dropped)}`);
    } finally {
      await pool.destroy().catch(() => undefined);
      await held.body?.cancel().catch(() => undefined);
    }
  });
});
