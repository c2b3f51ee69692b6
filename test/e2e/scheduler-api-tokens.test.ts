// Schedulers whose API wants a token (`apiTokens`, read from a file as the
// scheduler chart mounts its Secret) and gateways presenting one
// (`schedulerToken`), all separate processes on loopback. A gateway with the
// token serves sessions on every path to a runtime (relay connections,
// HTTP/2 event streams, plain `/api/proxy`); one without it gets a clear
// error, never a 401 an MCP client would take for its own; and a rotation
// that drops a gateway's token, then adds it back, is what operators would
// expect of it.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { until } from '../support/processes.ts';
import {
  connect,
  counter,
  initializeBody,
  LEGACY,
  metric,
  post,
  rpcResult,
  sessionOf,
  sessionsAcross,
  textOf,
  toolCallBody,
  type AnyClient,
  type RawReply,
} from './support.ts';

const OLD = 'api-token-old-0123456789abcdef';
const NEW = 'api-token-new-0123456789abcdef';
/** Every request through a scheduler on plain `/api/proxy`, which reads each one (and so checks each one's token). */
const PLAIN = ['--relay-connections', 'false', '--event-streams-over-http2', 'false'];
const REFUSED_LOG =
  "scheduler refused this gateway's API token: set schedulerToken (or schedulerTokenFile) to one of the schedulers' apiTokens";

describe('a scheduler API behind tokens', () => {
  let dir: string;
  let tokenFile: string;
  let cluster: TestCluster;
  /**
   * Writes the token file and waits until every replica has read it (they
   * look at it at most once a second): until they answer `status` to the
   * gateways' token (OLD) on a call that changes nothing.
   */
  const rotate = async (tokens: string, status: 200 | 401): Promise<void> => {
    writeFileSync(tokenFile, tokens);
    for (const s of cluster.schedulers) {
      await until(`${s.name} answers ${status} to the old token`, async () => {
        const res = await fetch(`${s.url}/api/epoch`, { headers: { authorization: `Bearer ${OLD}` } });
        await res.body?.cancel();
        return res.status === status || undefined;
      });
    }
  };
  const refusals = async (): Promise<number> => {
    let sum = 0;
    for (const s of cluster.schedulers) sum += await metric(s.url!, 'switchyard_scheduler_api_unauthorized_total');
    return sum;
  };
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-api-tokens-'));
    tokenFile = join(dir, 'api-tokens');
    writeFileSync(tokenFile, `${OLD}\n`);
    cluster = await startCluster({
      schedulers: 2,
      runtimes: 2,
      gateways: 1,
      apiToken: OLD,
      schedulerArgs: ['--api-token-file', tokenFile],
    });
  });
  after(async () => {
    await cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses the API without the token and keeps probes and metrics open', async () => {
    const url = cluster.schedulers[0]!.url!;
    const res = await fetch(`${url}/api/runtimes`);
    assert.equal(res.status, 401);
    assert.equal(res.headers.get('www-authenticate'), 'Bearer realm="switchyard-scheduler"');
    for (const path of ['/healthz', '/readyz', '/metrics']) assert.equal((await fetch(`${url}${path}`)).status, 200);
  });

  it('serves sessions on both runtimes through gateways presenting it, on every path to a runtime', async () => {
    const before = await refusals();
    const plain = await cluster.addGateway(undefined, { args: PLAIN });
    const gateways = [cluster.gateways[0]!, plain];
    const clients: AnyClient[] = [];
    try {
      for (const gateway of gateways) {
        const base = `http://127.0.0.1:${gateway.port}`;
        const opened = clients.length;
        const placed = await sessionsAcross(`${base}/mcp`, clients);
        const mine = clients.slice(opened);
        assert.equal(placed.size, 2, `${gateway.name} reached both runtimes`);
        for (const client of mine) for (let n = 1; n <= 3; n++) assert.equal(await counter(client), n);
        await until(`${mine.length} GET streams open through ${gateway.name}`, async () =>
          (await metric(base, 'switchyard_gateway_sse_streams_open')) >= mine.length ? true : undefined,
        );
      }
      let relays = 0;
      for (const s of cluster.schedulers)
        relays += await metric(s.url!, 'switchyard_scheduler_relay_connections_total');
      assert.ok(relays > 0, 'the first gateway used relay connections');
      assert.equal(await refusals(), before, 'no request of theirs was refused');
      for (const gateway of gateways) {
        const complaints = gateway.logs.filter((l) => (l.level as number) >= 40).map((l) => l.msg);
        assert.deepEqual(complaints, [], gateway.name);
      }
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
  });

  it('answers a gateway with a wrong token 503 for a new session, with a JSON-RPC error, and says why', async () => {
    const wrong = await cluster.addGateway(undefined, { schedulerToken: 'api-token-wrong-0123456789ab' });
    const reply = await post(`http://127.0.0.1:${wrong.port}/mcp`, initializeBody());
    assert.equal(reply.status, 503, reply.text);
    const body = JSON.parse(reply.text) as { jsonrpc: string; error: { message: string } };
    assert.equal(body.jsonrpc, '2.0');
    assert.match(body.error.message, /No scheduler replica answered/);
    await wrong.waitForLog((l) => l.msg === REFUSED_LOG && l.level === 50, 5_000);
  });

  it('answers 502, not 401, on an established session once its token is rotated out, and serves it again once back', async () => {
    const gateway = await cluster.addGateway(undefined, { args: PLAIN });
    const url = `http://127.0.0.1:${gateway.port}/mcp`;
    const client = await connect('v1', url);
    const call = (id: number): Promise<RawReply> =>
      post(url, toolCallBody(id, 'counter'), { 'mcp-session-id': sessionOf(client), 'mcp-protocol-version': LEGACY });
    try {
      assert.equal(await counter(client), 1);
      await rotate(`${NEW}\n`, 401);
      const refused = await call(2);
      assert.equal(refused.status, 502, refused.text);
      assert.match(
        (JSON.parse(refused.text) as { error: { message: string } }).error.message,
        /a scheduler refused this gateway's credentials/,
      );
      await gateway.waitForLog((l) => l.msg === REFUSED_LOG && l.level === 50, 5_000);
      // Both tokens during a rotation: the gateway's is good again, and its session was kept.
      await rotate(`${OLD}\n${NEW}\n`, 200);
      const served = await call(3);
      assert.equal(served.status, 200, served.text);
      assert.equal(textOf(rpcResult(served)), '2');
    } finally {
      await rotate(`${OLD}\n`, 200);
      await client.close();
    }
  });
});
