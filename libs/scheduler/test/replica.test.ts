import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http2 from 'node:http2';
import net from 'node:net';
import type { RuntimeNode } from '@switchyard/runtime';
import { MemoryLeaseStore } from '@switchyard/election';
import { FORWARDED_HEADER } from '@switchyard/protocol';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { WebSocket } from 'ws';
import { TOKEN, getJson, postJson, startReplicas, startRuntime, until } from './support.ts';

describe('three replicas in one process with a memory lease', () => {
  let replicas: SchedulerReplica[] = [];
  const runtimes: RuntimeNode[] = [];

  before(async () => {
    replicas = await startReplicas(3);
    runtimes.push(await startRuntime('r1', replicas[1]!.url));
    runtimes.push(await startRuntime('r2', replicas[2]!.url));
  });

  after(async () => {
    await Promise.all(runtimes.map((r) => r.close()));
    await Promise.all(replicas.map((r) => r.close()));
  });

  it('elects exactly one leader', async () => {
    await until('a leader', () => replicas.some((r) => r.isLeader) || undefined);
    assert.equal(replicas.filter((r) => r.isLeader).length, 1);
  });

  it('every replica sees both runtimes, whichever replica holds their tunnel', async () => {
    for (const replica of replicas) {
      await until(`runtimes on ${replica.replicaId}`, async () => {
        const { body } = await getJson(`${replica.url}/api/runtimes`);
        const ids = body.runtimes.filter((r: any) => r.available).map((r: any) => r.id);
        return ids.length === 2 || undefined;
      });
    }
  });

  it('answers a schedule alike on every replica and names the owner proxy', async () => {
    await until('same epoch everywhere', async () => {
      const epochs = await Promise.all(replicas.map((r) => getJson(`${r.url}/api/epoch`)));
      return new Set(epochs.map((e) => e.body.epoch)).size === 1 || undefined;
    });
    const answers = await Promise.all(
      replicas.map((r) => postJson(`${r.url}/api/schedule`, { class: 'demo', processId: 'p-42', explain: true })),
    );
    for (const answer of answers) assert.equal(answer.status, 200, JSON.stringify(answer.body));
    assert.equal(new Set(answers.map((a) => a.body.runtime)).size, 1);
    const chosen = answers[0]!.body;
    assert.match(chosen.proxyUrl, /\/api\/proxy\/r[12]$/);
  });

  it('reaches a runtime through /api/proxy on every replica, marking answers another replica gave', async () => {
    const holder = { r1: replicas[1]!, r2: replicas[2]! };
    for (const replica of replicas) {
      for (const id of ['r1', 'r2'] as const) {
        const res = await fetch(`${replica.url}/api/proxy/${id}/healthz`);
        assert.equal(res.status, 200, `${replica.replicaId} → ${id}`);
        assert.deepEqual(await res.json(), { status: 'ok' });
        // Forwarded from the replica holding the tunnel: a gateway then asks where the runtime is.
        const forwarded = replica !== holder[id];
        assert.equal(res.headers.get(FORWARDED_HEADER), forwarded ? '1' : null, `${replica.replicaId} → ${id}`);
      }
    }
  });

  it('serves /api/proxy over HTTP/2 with prior knowledge on the same port, and nothing else', async () => {
    const replica = replicas[1]!; // holds r1's tunnel
    const session = http2.connect(replica.url);
    const get = (path: string): Promise<{ status: number; body: any }> =>
      new Promise((resolve, reject) => {
        const stream = session.request({ ':path': path });
        let text = '';
        let status = 0;
        stream.on('response', (h) => (status = Number(h[':status'])));
        stream.on('data', (c: Buffer) => (text += c.toString()));
        stream.once('end', () => resolve({ status, body: JSON.parse(text) }));
        stream.once('error', reject);
      });
    try {
      assert.deepEqual(await get('/api/proxy/r1/healthz'), { status: 200, body: { status: 'ok' } });
      // Over HTTP/2 only the replica holding the tunnel answers (gateways dial the owner).
      assert.deepEqual(await get('/api/proxy/r2/healthz'), {
        status: 502,
        body: { error: 'runtime not connected', runtime: 'r2' },
      });
      assert.equal((await get('/api/epoch')).status, 404);
      // HTTP/1.1 on the same port is unaffected.
      assert.equal((await fetch(`${replica.url}/api/proxy/r1/healthz`)).status, 200);
    } finally {
      session.close();
    }
  });

  it("serves a runtime's metrics through /api/proxy, gauges read live", async () => {
    const res = await fetch(`${replicas[0]!.url}/api/proxy/r1/metrics`);
    assert.equal(res.status, 200);
    const text = await res.text();
    assert.match(text, /^switchyard_runtime_sandboxes \d+$/m);
    assert.match(text, /^switchyard_runtime_tool_calls_cancelled \d+$/m);
  });

  it('reports the streams open on its busiest tunnel, an event stream held counted while it is open', async () => {
    const replica = replicas[1]!; // holds r1's tunnel
    const busiest = async (): Promise<number> => {
      const text = await (await fetch(`${replica.url}/metrics`)).text();
      return Number(/^switchyard_scheduler_tunnel_streams_busiest (\d+)$/m.exec(text)?.[1]);
    };
    const before = await busiest();
    assert.ok(before >= 1, `the replica's own watch of r1 is a stream (${before})`);
    const mcp = `${replica.url}/api/proxy/r1/mcp`;
    // What a gateway asserts of a request (the runtime serves classes, not clients).
    const legacy = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'x-switchyard-class': 'demo',
      'x-switchyard-process': 'p-stream',
    };
    const init = await fetch(mcp, {
      method: 'POST',
      headers: { ...legacy, 'mcp-protocol-version': '2025-11-25' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } },
      }),
    });
    assert.equal(init.status, 200, init.status === 200 ? '' : await init.text());
    await init.text();
    const session = { 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': '2025-11-25' };
    const left = new AbortController();
    const stream = await fetch(mcp, {
      headers: { ...legacy, ...session, accept: 'text/event-stream' },
      signal: left.signal,
    });
    assert.equal(stream.status, 200, stream.status === 200 ? '' : await stream.text());
    assert.equal(await busiest(), before + 1);
    left.abort();
    await until('the stream to be closed on the tunnel', async () => (await busiest()) === before || undefined);
  });

  it("exports the leader's catch-up deltas on every replica", async () => {
    // A follower that missed epochs on a busy connection gets one delta instead of a snapshot (libs/epoch
    // catch-up.test.ts): the only sign of it in /metrics. Each replica exports it, whichever leads next.
    for (const replica of replicas) {
      const text = await (await fetch(`${replica.url}/metrics`)).text();
      assert.match(text, /^# TYPE switchyard_scheduler_epoch_catch_up_deltas_total counter$/m, replica.replicaId);
      assert.match(text, /^switchyard_scheduler_epoch_catch_up_deltas_total \d+$/m, replica.replicaId);
    }
  });

  it('serves the API to an HTTP/1.1 request that offers an h2c upgrade, ignoring the offer', async () => {
    // What `curl --http2` and Java's HttpClient send on an http: URL (RFC 9113 §3.2 lets a server ignore it).
    const request = (path: string): Promise<string> =>
      new Promise((resolve, reject) => {
        const socket = net.connect(replicas[0]!.port, '127.0.0.1');
        let answer = '';
        socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
        socket.once('error', reject);
        socket.once('close', () => resolve(answer));
        socket.end(
          `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade, HTTP2-Settings, close\r\n` +
            'Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n',
        );
      });
    const epoch = await request('/api/epoch');
    assert.match(epoch, /^HTTP\/1\.1 200 /, epoch);
    assert.match(epoch, /"replica":"s0"/);
    const unknown = await request('/nope');
    assert.match(unknown, /^HTTP\/1\.1 404 /, unknown);
  });

  it('answers 502 for a runtime nobody holds and 404 for its record', async () => {
    const proxied = await fetch(`${replicas[0]!.url}/api/proxy/ghost/healthz`);
    assert.equal(proxied.status, 502);
    assert.deepEqual(await proxied.json(), { error: 'runtime not connected', runtime: 'ghost' });
    const record = await getJson(`${replicas[0]!.url}/api/runtime/ghost`);
    assert.equal(record.status, 404);
  });

  it('rejects a bad identity with a 400 naming the field', async () => {
    const answer = await postJson(`${replicas[0]!.url}/api/schedule`, { class: 'demo', processId: 'bad id' });
    assert.equal(answer.status, 400);
    assert.match(answer.body.error, /^processId: /);
  });
});

describe('epoch sync admission', () => {
  let replicas: SchedulerReplica[] = [];
  before(async () => {
    replicas = await startReplicas(1);
  });
  after(() => Promise.all(replicas.map((r) => r.close())));

  const cases: Array<[string, Record<string, string>, number]> = [
    ['refuses a peer with no token', {}, 401],
    ['refuses a peer with a wrong token', { authorization: 'Bearer not-the-token' }, 401],
    ['admits a peer with the join token', { authorization: `Bearer ${TOKEN}` }, 101],
  ];
  for (const [name, headers, status] of cases) {
    it(name, async () => {
      const ws = new WebSocket(`${replicas[0]!.url.replace('http', 'ws')}/api/sync/peer`, { headers });
      const seen = await new Promise<number>((resolve) => {
        ws.once('upgrade', () => resolve(101));
        ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
        ws.once('error', () => resolve(-1));
      });
      ws.terminate();
      assert.equal(seen, status);
    });
  }
});

describe('epoch sync after a join token is removed', () => {
  const OLD = 'join-token-old-0123456789abcdef';
  const NEW = TOKEN;
  let accepted: readonly string[] = [OLD, NEW];
  let replicas: SchedulerReplica[] = [];
  before(async () => {
    replicas = await startReplicas(2, new MemoryLeaseStore(), undefined, { joinTokens: () => accepted });
  });
  after(() => Promise.all(replicas.map((r) => r.close())));

  const runtimesOf = async (replica: SchedulerReplica): Promise<string[]> =>
    ((await getJson(`${replica.url}/api/runtimes`)).body as { runtimes: { id: string }[] }).runtimes.map((r) => r.id);

  it('closes a peer on it (1008), keeps one on a listed token, and followers sync on with their new first token', async () => {
    const leader = (await until('a leader', () => replicas.find((r) => r.isLeader)))!;
    const follower = replicas.find((r) => r !== leader)!;
    await until('the follower has an epoch', async () => (await getJson(`${follower.url}/api/epoch`)).status === 200);
    const peer = async (token: string): Promise<{ ws: WebSocket; closed: Promise<number> }> => {
      const ws = new WebSocket(`${leader.url.replace('http', 'ws')}/api/sync/peer-${token === OLD ? 'old' : 'new'}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
      await once(ws, 'upgrade');
      return { ws, closed };
    };
    const old = await peer(OLD);
    const kept = await peer(NEW);
    try {
      accepted = [NEW];
      assert.equal(await old.closed, 1008);
      assert.equal(kept.ws.readyState, WebSocket.OPEN, 'a peer on the new token stays');
      // The follower presented OLD, its first token, and was closed too: it syncs on with NEW.
      const late = await startRuntime('late', leader.url);
      try {
        await until('the follower sees a runtime joined since', async () =>
          (await runtimesOf(follower)).includes('late'),
        );
      } finally {
        await late.close();
      }
    } finally {
      old.ws.terminate();
      kept.ws.terminate();
    }
  });
});

describe('upgrade requests a replica refuses', () => {
  let replica: SchedulerReplica;
  before(async () => {
    [replica] = (await startReplicas(1)) as [SchedulerReplica];
  });
  after(() => replica?.close());

  const cases: Array<[string, string, number]> = [
    ['an unknown path', '/nope', 404],
    ['epoch sync without a token', '/api/sync/peer', 401],
    ['epoch sync for a bad replica id', '/api/sync/bad%20id', 400],
  ];
  for (const [name, path, status] of cases) {
    it(`survives a client that resets its connection after the refusal: ${name} (${status})`, async () => {
      // The replica runs in this process: what would end its own process is an uncaught exception here.
      const uncaught: unknown[] = [];
      const monitor = (error: unknown): void => void uncaught.push(error);
      process.on('uncaughtExceptionMonitor', monitor);
      try {
        const socket = net.connect(replica.port, '127.0.0.1');
        socket.on('error', () => {});
        await once(socket, 'connect');
        socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n`);
        const [head] = (await once(socket, 'data')) as [Buffer];
        assert.match(head.toString(), new RegExp(`^HTTP/1\\.1 ${status} `));
        // The refusal is out and the replica's side half-closed; a reset now reaches a socket still open there.
        const closed = once(socket, 'close');
        socket.resetAndDestroy();
        await closed;
        const health = await fetch(`${replica.url}/healthz`);
        assert.equal(health.status, 200);
        assert.deepEqual(uncaught, []);
      } finally {
        process.off('uncaughtExceptionMonitor', monitor);
      }
    });
  }
});
