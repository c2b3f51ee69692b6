// Acceptance at the process level: bursts of tool calls to one tunnelled
// runtime. The gateway sends calls through a scheduler on relay connections,
// each holding one of the runtime's tunnel streams for as long as it is kept
// alive, idle or not. Without a bound, a burst of N calls left N idle relays
// holding N streams for a minute, so that a large enough burst (the runtime
// takes 4,096) got later event streams refused. Here 300 calls in flight at
// once all succeed; at most 128 of them ride relays, the rest go through
// `/api/proxy` (whose streams end with each request), and after the burst the
// runtime's tunnel holds no more streams than those relays.
//
// Then calls enough to fill a runtime's tunnel (4,088 streams for traffic of
// the 4,096 a runtime takes), with two runtimes: calls bound to the full one
// get a JSON-RPC 503 at once, new sessions (of new named processes, whose
// first placement the scheduler remembers as pending) are placed on the
// other, and once the calls end the full one serves again.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Pool } from 'undici';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { until } from '../support/processes.ts';
import { LEGACY, initializeBody, metric, post, rpcResult, textOf, toolCallBody } from './support.ts';

const CALLS = 300;
/** The gateway's bound on relays per (scheduler, runtime). */
const RELAYS_MAX = 128;
/** Streams the scheduler keeps on a tunnel for its own use (watch, fetches). */
const CONTROL_STREAMS = 8;
/** Streams of a runtime's tunnel that traffic may use (of the 4,096 a runtime takes). */
const TRAFFIC_STREAMS = 4096 - CONTROL_STREAMS;
/** Calls held in flight to fill it: more than it carries. */
const FILLING = TRAFFIC_STREAMS + 100;

/** Opens `count` legacy sessions of `process` (sessions of one process share its sandbox, on one runtime). */
async function openSessions(url: string, process: string, count: number): Promise<Record<string, string>[]> {
  return Promise.all(
    Array.from({ length: count }, async () => {
      const identity = { 'mcp-protocol-version': LEGACY, 'x-switchyard-process': process };
      const init = await post(url, initializeBody(), identity);
      assert.equal(init.status, 200, init.text);
      return { ...identity, 'mcp-session-id': init.headers.get('mcp-session-id')! };
    }),
  );
}

/** The runtime serving `session`, from its whoami tool. */
async function runtimeOf(url: string, session: Record<string, string>): Promise<string> {
  const reply = await post(url, toolCallBody(1, 'whoami'), session);
  assert.equal(reply.status, 200, reply.text);
  return (JSON.parse(textOf(rpcResult(reply))) as { runtime: string }).runtime;
}

/**
 * What each app warned about last, and its lines about sessions: printed
 * when the session outlived the fill but not the recovery, which happened
 * once in a suite run on a machine loaded past its cores and not again in
 * six reruns, so that the next time says where the session went.
 */
function printTrouble(cluster: TestCluster): void {
  for (const app of [...cluster.schedulers, ...cluster.runtimes, ...cluster.gateways]) {
    const lines = app.logs.filter((l) => Number(l.level) >= 40 || /session|tunnel/.test(String(l.msg)));
    for (const line of lines.slice(-12)) console.log(`# ${app.name}: ${JSON.stringify(line)}`);
  }
}

/** The JSON-RPC error reason of a 503 reply. */
function reasonOf(reply: { text: string }): string | undefined {
  return (JSON.parse(reply.text) as { error?: { data?: { reason?: string } } }).error?.data?.reason;
}

describe('bursts of calls to one tunnelled runtime', () => {
  let cluster: TestCluster;
  before(async () => {
    cluster = await startCluster({
      schedulers: 1,
      runtimes: 2,
      // Thousands of calls at once stall event loops on a 2-core machine for
      // a second or more: the product's own liveness timing, not the suites' faster one.
      tunnelPingIntervalMs: 5000,
      election: { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2000 },
      gatewayArgs: ['--principal-concurrency-max', String(FILLING * 2)],
    });
    await cluster.waitForRuntimes(['r0', 'r1'], 15_000);
  });
  after(() => cluster?.stop());

  it('succeeds call by call, and leaves no more tunnel streams held than the relays the gateway keeps', async () => {
    const url = cluster.gatewayUrl();
    const scheduler = cluster.schedulers[0]!.url!;
    const sessions = await openSessions(url, 'burst', 10);
    const relaysBefore = await metric(scheduler, 'switchyard_scheduler_relay_connections_total');
    const proxiedBefore = await metric(scheduler, 'switchyard_scheduler_proxy_requests_total');
    const gatewayBase = new URL(url).origin;
    const limitedBefore = await metric(gatewayBase, 'switchyard_gateway_relay_limit_reached_total');

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
    // The gateway counts the calls it sent there for want of a relay.
    const limited = (await metric(gatewayBase, 'switchyard_gateway_relay_limit_reached_total')) - limitedBefore;
    assert.ok(limited >= CALLS - RELAYS_MAX && limited <= proxied, `past the relay limit: ${limited}`);
    const held = await metric(scheduler, 'switchyard_scheduler_tunnel_streams_busiest');
    assert.ok(held <= RELAYS_MAX + CONTROL_STREAMS, `streams still held on the runtime's tunnel: ${held}`);
  });

  it('refuses calls bound to a full runtime at once, places new sessions on the other, and recovers', async () => {
    const url = cluster.gatewayUrl();
    const scheduler = cluster.schedulers[0]!.url!;
    const busiest = (): Promise<number> => metric(scheduler, 'switchyard_scheduler_tunnel_streams_busiest');
    const sessions = await openSessions(url, 'full', 20);
    const full = await runtimeOf(url, sessions[0]!);
    const other = full === 'r0' ? 'r1' : 'r0';

    // Calls that sleep until they are cancelled, more than the tunnel carries,
    // each on a connection of its own opened for it: a connection left idle
    // by the requests above is closed by the gateway after its keep-alive
    // timeout, and this process, busy starting thousands of calls, could
    // send one on it just then (the call then fails before the gateway reads it).
    const { origin, pathname } = new URL(url);
    const calls = new Pool(origin, { connections: FILLING });
    const answered: Array<{ status: number; text: string }> = [];
    const filling = Array.from({ length: FILLING }, (_, n) =>
      calls
        .request({
          path: pathname,
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            ...sessions[n % sessions.length]!,
          },
          body: JSON.stringify(toolCallBody(n + 2, 'sleep', { ms: 120_000 })),
        })
        .then(
          // A call the tunnel took answers 200 at once and then streams until it is cancelled.
          async (res) => {
            const text = await res.body.text().catch(() => undefined);
            if (text !== undefined) answered.push({ status: res.statusCode, text });
          },
          () => undefined,
        ),
    );
    try {
      await until('the tunnel full', async () => ((await busiest()) >= TRAFFIC_STREAMS ? true : undefined), 60_000);

      const started = performance.now();
      const bound = await post(url, toolCallBody(1, 'counter'), sessions[0]!);
      assert.equal(bound.status, 503, bound.text);
      assert.equal(reasonOf(bound), 'capacity_exhausted');
      // The calls holding the tunnel sleep for minutes: a call queued for a stream would wait that long.
      assert.ok(
        performance.now() - started < 10_000,
        `answered at once, not queued: ${performance.now() - started} ms`,
      );

      for (let k = 0; k < 5; k++) {
        const [fresh] = await openSessions(url, `fresh-${k}`, 1);
        assert.equal(await runtimeOf(url, fresh!), other, `a new session (${k}) lands on the runtime with room`);
      }
    } finally {
      await calls.destroy();
      await Promise.all(filling);
    }
    // Only the calls past the tunnel's limit were answered before the rest were cancelled: each with a 503.
    assert.ok(answered.length > 0, 'some calls found the tunnel full');
    for (const reply of answered) {
      assert.equal(reply.status, 503, reply.text);
      assert.equal(reasonOf(reply), 'capacity_exhausted');
    }
    // Down to what relays kept alive may hold (those of the burst above may be on the other runtime).
    const kept = RELAYS_MAX + CONTROL_STREAMS;
    await until('the streams ended', async () => ((await busiest()) <= kept ? true : undefined), 30_000);
    const again = await post(url, toolCallBody(1, 'counter'), sessions[0]!);
    if (again.status !== 200) printTrouble(cluster);
    assert.equal(again.status, 200, again.text);
  });
});
