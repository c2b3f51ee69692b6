// Direct mode as the runtime chart deploys it: runtimes serve /mcp on a
// direct listener bound to every interface and advertise the address
// gateways dial (directListen.advertiseUrl; the pod IP in a cluster), with a
// token; a gateway in direct mode presents it (upstreamToken) and reaches
// the runtimes with no scheduler hop. A gateway with a wrong token gets a
// clear error, never a 401 an MCP client would take for its own.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import {
  connect,
  counter,
  freePort,
  initializeBody,
  metric,
  post,
  sessionsAcross,
  whoami,
  type AnyClient,
} from './support.ts';

const TOKEN = 'direct-token-0123456789abcdef';
const NO_ADDRESS_WARNING =
  'the direct listener advertises an address only this machine can dial: set directListen.advertiseUrl';
const RUNTIME_TOKEN_REFUSED =
  "runtime refused this gateway's upstream token: set upstreamToken (or upstreamTokenFile) to one of the runtimes' directListen tokens";

const directArgs = (port: number, advertise: boolean): string[] => [
  ...['--direct-listen.enabled', 'true', '--direct-listen.host', '0.0.0.0', '--direct-listen.port', String(port)],
  ...['--direct-listen.token', TOKEN],
  ...(advertise ? ['--direct-listen.advertise-url', `http://127.0.0.1:${port}`] : []),
];

describe('direct mode with advertised runtime addresses', () => {
  let cluster: TestCluster;
  const ports: Record<string, number> = {};
  before(async () => {
    cluster = await startCluster({ schedulers: 1, runtimes: 0, gateways: 0 });
    for (const id of ['r0', 'r1']) {
      ports[id] = await freePort();
      await cluster.startRuntime(id, 0, { args: directArgs(ports[id]!, true) });
    }
    await cluster.waitForRuntimes(['r0', 'r1']);
  });
  after(() => cluster?.stop());

  it('advertises the address given, to the scheduler too', async () => {
    for (const runtime of cluster.runtimes) {
      const expected = `http://127.0.0.1:${ports[runtime.name]}`;
      const ready = await runtime.waitForLog((l) => l.msg === 'ready');
      assert.equal(ready.direct, expected);
      const seen = (await (await fetch(`${cluster.schedulerUrls()[0]}/api/runtime/${runtime.name}`)).json()) as {
        runtime: { address?: string };
      };
      assert.equal(seen.runtime.address, expected);
      assert.equal(runtime.logs.filter((l) => l.msg === NO_ADDRESS_WARNING).length, 0);
    }
  });

  it('serves sessions on both runtimes straight from the gateway, no request through a scheduler', async () => {
    const scheduler = cluster.schedulerUrls()[0]!;
    const through = async (): Promise<number> =>
      (await metric(scheduler, 'switchyard_scheduler_proxy_requests_total')) +
      (await metric(scheduler, 'switchyard_scheduler_relay_connections_total'));
    const before = await through();
    const gateway = await cluster.addGateway(undefined, {
      args: ['--upstream-mode', 'direct', '--upstream-token', TOKEN],
    });
    const clients: AnyClient[] = [];
    try {
      const placed = await sessionsAcross(`http://127.0.0.1:${gateway.port}/mcp`, clients);
      assert.deepEqual([...placed].sort(), ['r0', 'r1']);
      for (const client of clients) for (let n = 1; n <= 3; n++) assert.equal(await counter(client), n);
      assert.equal(await through(), before, 'no request went through the scheduler');
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
  });

  it('answers a gateway with the wrong token 502 with a JSON-RPC error, and says why in its log', async () => {
    const gateway = await cluster.addGateway(undefined, {
      args: ['--upstream-mode', 'direct', '--upstream-token', 'direct-token-wrong-0123456789'],
    });
    const reply = await post(`http://127.0.0.1:${gateway.port}/mcp`, initializeBody());
    assert.equal(reply.status, 502, reply.text);
    const body = JSON.parse(reply.text) as { jsonrpc: string; error: { message: string } };
    assert.equal(body.jsonrpc, '2.0');
    assert.match(body.error.message, /a runtime refused this gateway's credentials/);
    await gateway.waitForLog((l) => l.msg === RUNTIME_TOKEN_REFUSED && l.level === 50, 5_000);
  });

  it('loses the sessions of a runtime that goes silent: one held call ends 502, the next 404 at once', async () => {
    const gateway = await cluster.addGateway(undefined, {
      args: ['--upstream-mode', 'direct', '--upstream-token', TOKEN, '--upstream-check-interval-ms', '1000'],
    });
    const url = `http://127.0.0.1:${gateway.port}/mcp`;
    const clients: AnyClient[] = [];
    const victim = cluster.runtimes.find((r) => r.name === 'r0')!;
    try {
      // Sessions on both: with none on r0 there would be nothing to hold, and with none on r1 nothing to keep.
      assert.deepEqual([...(await sessionsAcross(url, clients))].sort(), ['r0', 'r1']);
      const placed = await Promise.all(clients.map(async (c) => (await whoami(c)).runtime));
      const frozen = clients.filter((_, i) => placed[i] === 'r0');
      const alive = clients.filter((_, i) => placed[i] === 'r1');
      for (const c of clients) assert.equal(await counter(c), 1);
      victim.signal('SIGSTOP');
      const started = performance.now();
      // Held by the frozen runtime until the gateway's checks find it silent (one to two intervals).
      const held = await Promise.all(frozen.map((c) => counter(c).then(String, (e: Error) => e.message)));
      for (const message of held) assert.match(message, /the runtime stopped answering/);
      assert.ok(performance.now() - started < 5000, `held calls ended after ${performance.now() - started} ms`);
      for (const c of frozen) {
        const at = performance.now();
        await assert.rejects(counter(c), /404|[Ss]ession not found/);
        assert.ok(performance.now() - at < 1000, 'the silent runtime is not dialled again');
      }
      for (const c of alive) assert.equal(await counter(c), 2);
      const fresh = await connect('v2', url);
      clients.push(fresh);
      assert.equal((await whoami(fresh)).runtime, 'r1');
    } finally {
      victim.signal('SIGCONT');
      await Promise.all(clients.map((c) => c.close().catch(() => {})));
    }
  });

  it('warns when a runtime listening on every interface advertises no address', async () => {
    const runtime = await cluster.startRuntime('r2', 0, { args: directArgs(await freePort(), false) });
    await runtime.waitForLog((l) => l.msg === NO_ADDRESS_WARNING && l.level === 40, 5_000);
  });
});
