// Acceptance at the process level: three schedulers, two runtimes and a
// gateway as OS processes on loopback, driven by real SDK clients of both
// generations. One cluster for the whole file.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { until } from '../support/processes.ts';
import {
  callWith,
  connect,
  counter,
  metric,
  sessionOf,
  textOf,
  whoami,
  type AnyClient,
  type Generation,
} from './support.ts';

const SESSIONS = 50;
const CALLS = 20;

/** Ends a legacy session with DELETE so its sandbox is freed, then closes the client. */
async function closeSession(client: AnyClient): Promise<void> {
  const transport = (client as unknown as { transport?: { terminateSession?(): Promise<void> } }).transport;
  await transport?.terminateSession?.().catch(() => undefined);
  await client.close();
}

describe('gateway sessions and streams across processes', () => {
  let cluster: TestCluster;
  let gatewayBase: string;
  before(async () => {
    // Anonymous clients share one principal (their address), and every open
    // GET stream holds a slot: 100 concurrent sessions need more than the default.
    // Runtimes log at debug: a cancelled call is told at info once per 10 s, each one at debug, and
    // the cancellation cases below read each one's line.
    cluster = await startCluster({
      everything: true,
      gatewayArgs: ['--principal-concurrency-max', '1000'],
      runtimeArgs: ['--log-level', 'debug'],
    });
    gatewayBase = cluster.gatewayUrl().replace(/\/mcp$/, '');
  });
  after(() => cluster?.stop());

  for (const generation of ['v1', 'v2'] as const) {
    it(`keeps each of ${SESSIONS} concurrent SDK ${generation} sessions on one sandbox while spreading them over both runtimes`, async () => {
      const clients: AnyClient[] = [];
      try {
        await Promise.all(
          Array.from({ length: SESSIONS }, async () => clients.push(await connect(generation, cluster.gatewayUrl()))),
        );
        const results = await Promise.all(
          clients.map(async (client) => {
            const first = await whoami(client);
            const counts: number[] = [];
            for (let i = 0; i < CALLS; i++) counts.push(await counter(client));
            return { first, last: await whoami(client), counts, session: sessionOf(client) };
          }),
        );
        const expected = Array.from({ length: CALLS }, (_, i) => i + 1);
        for (const r of results) {
          assert.deepEqual(r.counts, expected, `session ${r.session} counts up by exactly one per call`);
          assert.deepEqual(r.last, r.first, `session ${r.session} keeps its runtime and sandbox`);
        }
        const runtimes = new Set(results.map((r) => r.first.runtime));
        assert.deepEqual([...runtimes].sort(), ['r0', 'r1'], 'sessions land on both runtimes');
        // The POSTs went on relay connections, each carrying many of them.
        let relays = 0;
        for (const s of cluster.schedulers)
          relays += await metric(s.url!, 'switchyard_scheduler_relay_connections_total');
        assert.ok(relays > 0 && relays < SESSIONS * CALLS, `relay connections: ${relays}`);
        assert.equal(new Set(results.map((r) => r.first.sandbox)).size, SESSIONS, 'one sandbox per session');
      } finally {
        await Promise.all(clients.map(closeSession));
      }
    });
  }

  it('routes every stateless 2026-07-28 request naming X-Switchyard-Process p1 to one sandbox', async () => {
    const client = await connect('v2-modern', cluster.gatewayUrl(), { 'X-Switchyard-Process': 'p1' });
    try {
      const counts: number[] = [];
      const seen = new Set<string>();
      for (let i = 0; i < 10; i++) {
        counts.push(await counter(client));
        const who = await whoami(client);
        seen.add(`${who.runtime}/${who.sandbox}`);
      }
      assert.deepEqual(
        counts,
        Array.from({ length: 10 }, (_, i) => i + 1),
      );
      assert.equal(seen.size, 1, `one runtime and sandbox, saw ${[...seen].join(' ')}`);
      assert.match([...seen][0]!, /\/p1$/);
    } finally {
      await client.close();
    }
  });

  it('spreads stateless requests without a process identity over fresh sandboxes on both runtimes', async () => {
    const client = await connect('v2-modern', cluster.gatewayUrl());
    try {
      const who = [];
      for (let i = 0; i < 24; i++) who.push(await whoami(client));
      assert.equal(new Set(who.map((w) => w.sandbox)).size, 24, 'every request gets its own sandbox');
      assert.deepEqual([...new Set(who.map((w) => w.runtime))].sort(), ['r0', 'r1']);
    } finally {
      await client.close();
    }
  });

  for (const generation of ['v1', 'v2'] as const) {
    it(`relays a server notification on the legacy GET stream of an SDK ${generation} client`, async () => {
      const client = await connect(generation, cluster.gatewayUrl(), { 'X-Switchyard-Class': 'everything' });
      try {
        // Registering a session resource upstream makes the sandbox announce a list change:
        // a notification related to no request, so it can only travel on the GET stream.
        const changed = new Promise<void>((resolve) => {
          const set = (client as unknown as { setNotificationHandler: (...a: unknown[]) => void })
            .setNotificationHandler;
          if (generation === 'v2') set.call(client, 'notifications/resources/list_changed', () => resolve());
          else {
            void import('@modelcontextprotocol/sdk/types.js').then(({ ResourceListChangedNotificationSchema }) =>
              set.call(client, ResourceListChangedNotificationSchema, () => resolve()),
            );
          }
        });
        await until('a GET stream open through the gateway', async () =>
          (await metric(gatewayBase, 'switchyard_gateway_sse_streams_open')) >= 1 ? true : undefined,
        );
        const result = await client.callTool({
          name: 'gzip-file-as-resource',
          arguments: { name: `n-${generation}.gz`, data: 'data:text/plain;base64,aGVsbG8=', outputType: 'resource' },
        });
        assert.ok(!(result as { isError?: boolean }).isError, textOf(result));
        await Promise.race([
          changed,
          new Promise((_, reject) => setTimeout(() => reject(new Error('no list_changed on GET')), 10_000).unref()),
        ]);
      } finally {
        await closeSession(client);
      }
    });
  }

  it('holds GET streams as HTTP/2 streams on a few scheduler connections, one descriptor each', async () => {
    const STREAMS = 40;
    const pid = cluster.gateways[0]!.pid;
    const descriptors = (): number => readdirSync(`/proc/${pid}/fd`).length;
    const clients: AnyClient[] = [];
    const before = descriptors();
    try {
      for (let i = 0; i < STREAMS; i++) clients.push(await connect('v2', cluster.gatewayUrl()));
      await until(`${STREAMS} GET streams open through the gateway`, async () =>
        (await metric(gatewayBase, 'switchyard_gateway_sse_streams_open')) >= STREAMS ? true : undefined,
      );
      // Each stream holds its client's socket; over HTTP/1.1 upstream it would hold a second one.
      const added = descriptors() - before;
      assert.ok(added < STREAMS * 1.5, `${added} descriptors for ${STREAMS} streams`);
    } finally {
      await Promise.all(clients.map(closeSession));
    }
  });

  const cancellations: Array<{ generation: Generation; how: string }> = [
    { generation: 'v2-modern', how: 'closing the 2026-07-28 response stream' },
    { generation: 'v2', how: 'a legacy notifications/cancelled from SDK v2' },
    { generation: 'v1', how: 'a legacy notifications/cancelled from SDK v1' },
  ];
  for (const { generation, how } of cancellations) {
    it(`cancels a running sleep on the runtime after ${how}`, async () => {
      const process = `sleeper-${generation}`;
      const client = await connect(generation, cluster.gatewayUrl(), { 'X-Switchyard-Process': process });
      try {
        const controller = new AbortController();
        let progressed!: () => void;
        const running = new Promise<void>((resolve) => (progressed = resolve));
        const call = callWith(
          generation,
          client,
          { name: 'sleep', arguments: { ms: 30_000 } },
          { signal: controller.signal, onprogress: () => progressed() },
        );
        call.catch(() => undefined);
        await running;
        const started = performance.now();
        controller.abort();
        await assert.rejects(call, /abort/i);
        const line = await Promise.any(
          cluster.runtimes.map((r) => r.waitForLog((l) => l.event === 'tool.cancelled' && l.sandbox === process, 5000)),
        );
        assert.equal(line.tool, 'sleep');
        assert.ok(performance.now() - started < 5000);
      } finally {
        await closeSession(client);
      }
    });
  }
});
