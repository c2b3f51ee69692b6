// A join token admits its holder to the connect path, and the holder names its own runtime id. Whoever holds
// another token (a leaked one, a compromised node's) must not take over the id of a runtime that is connected:
// the tunnel of that id carries every session placed on it, of every tenant, tool calls and all.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type http2 from 'node:http2';
import type { RuntimeNode } from '@switchyard/runtime';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { dialTunnel, type TunnelDialer } from '@switchyard/tunnel';
import { TOKEN, getJson, quietLogger, startReplicas, startRuntime, until } from './support.ts';

const OTHER = 'another-join-token-0123456789';

/** A runtime that dials as `id` with `token` and keeps whatever reaches it. */
function impostor(url: string, id: string, token: string) {
  const received: string[] = [];
  const refusals: number[] = [];
  const messages: string[] = [];
  const dialer: TunnelDialer = dialTunnel({
    url,
    token,
    info: { id, classes: ['demo'], metadata: {}, version: '1.0.0', limits: {} },
    handler: (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        received.push(`${req.method} ${req.url} ${body}`);
        res.end('impostor');
      });
    },
    logger: {
      ...quietLogger,
      error: (fields: object, message?: string) => {
        refusals.push((fields as { status?: number }).status ?? 0);
        messages.push(message ?? '');
      },
    },
  });
  return { dialer, received, refusals, messages };
}

describe('a runtime id claimed with another join token', () => {
  let replicas: SchedulerReplica[];
  let runtime: RuntimeNode;
  before(async () => {
    replicas = await startReplicas(1, undefined, quietLogger, { joinTokens: () => [TOKEN, OTHER] });
    runtime = await startRuntime('rt-x', replicas[0]!.url);
    await until('rt-x joined', async () => (await getJson(`${replicas[0]!.url}/api/runtime/rt-x`)).status === 200);
  });
  after(async () => {
    await runtime.close();
    await Promise.all(replicas.map((r) => r.close()));
  });

  it('is refused with 409 while the runtime is connected, which keeps its tunnel and its traffic', async () => {
    const before = (await getJson(`${replicas[0]!.url}/api/runtime/rt-x`)).body;
    const claim = impostor(replicas[0]!.url, 'rt-x', OTHER);
    try {
      await until('the claim is answered', () => claim.refusals.length > 0 || claim.dialer.connected);
      assert.equal(claim.dialer.connected, false, 'the impostor holds no tunnel');
      assert.deepEqual(claim.refusals, [409]);
      // What the refused runtime's operator reads: which of the two causes it may be.
      assert.match(claim.messages[0]!, /another runtime uses the same id \(give each its own\)/);
      const call = await fetch(`${replicas[0]!.url}/api/proxy/rt-x/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: {} } }),
      });
      assert.notEqual(await call.text(), 'impostor');
      assert.deepEqual(claim.received, [], 'nothing meant for rt-x reached the impostor');
      assert.equal(runtime.connected, true);
      const after = (await getJson(`${replicas[0]!.url}/api/runtime/rt-x`)).body;
      assert.equal(after.runtime.generation, before.runtime.generation, 'the tunnel of rt-x is the one it had');
    } finally {
      await claim.dialer.close();
    }
  });
});

describe('a runtime id claimed with another join token at another replica', () => {
  let replicas: SchedulerReplica[];
  let runtime: RuntimeNode;
  before(async () => {
    replicas = await startReplicas(2, undefined, quietLogger, { joinTokens: () => [TOKEN, OTHER] });
    runtime = await startRuntime('rt-y', replicas[0]!.url);
    await until('rt-y live on both replicas', async () =>
      (await Promise.all(replicas.map(async (r) => (await getJson(`${r.url}/api/runtime/rt-y`)).body?.runtime))).every(
        (rt) => rt?.available === true,
      ),
    );
  });
  after(async () => {
    await runtime.close();
    await Promise.all(replicas.map((r) => r.close()));
  });

  it('is refused with 409 there, once its view shows the runtime live here', async () => {
    const claim = impostor(replicas[1]!.url, 'rt-y', OTHER);
    try {
      await until('the claim is answered', () => claim.refusals.length > 0 || claim.dialer.connected);
      assert.equal(claim.dialer.connected, false, 'the impostor holds no tunnel');
      assert.deepEqual(claim.refusals, [409]);
      assert.equal((await getJson(`${replicas[1]!.url}/api/runtime/rt-y`)).body.runtime.owner, 's0');
    } finally {
      await claim.dialer.close();
    }
  });

  it('keeps the join token fingerprints and instances out of every API answer (they are for peers only)', async () => {
    let snapshots = 0;
    for (const replica of replicas) {
      const one = (await getJson(`${replica.url}/api/runtime/rt-y`)).body;
      assert.ok(!('tokenFingerprint' in one.runtime), JSON.stringify(one.runtime));
      assert.ok(!('instance' in one.runtime), JSON.stringify(one.runtime));
      const list = (await getJson(`${replica.url}/api/runtimes`)).body;
      assert.ok(!('tokenFingerprint' in list.runtimes[0]), JSON.stringify(list.runtimes[0]));
      assert.ok(!('instance' in list.runtimes[0]), JSON.stringify(list.runtimes[0]));
      const epoch = (await getJson(`${replica.url}/api/epoch`)).body.epoch as number;
      // Epochs are kept by the replica that led when they were committed.
      const kept = await getJson(`${replica.url}/api/epoch/${epoch}/snapshot`);
      if (kept.status !== 200) continue;
      snapshots++;
      assert.equal(kept.body.runtimes[0].runtime.id, 'rt-y');
      assert.ok(!JSON.stringify(kept.body).includes('tokenFingerprint'));
      assert.ok(!JSON.stringify(kept.body).includes('"instance"'));
    }
    assert.ok(snapshots > 0, 'the leader answered its snapshot');
  });
});
