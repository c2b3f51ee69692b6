// The scheduler API behind tokens (`apiTokens`): two replicas in one process,
// a real runtime on each, and on s0 a stand-in runtime that records the
// headers of every request it is sent, so that the test sees what crosses
// a tunnel. Everything on loopback.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once, type EventEmitter } from 'node:events';
import http, { type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import http2 from 'node:http2';
import { MemoryLeaseStore } from '@switchyard/election';
import type { RuntimeNode } from '@switchyard/runtime';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { dialTunnel, type TunnelDialer } from '@switchyard/tunnel';
import { askRelay, exchangeRaw } from '@switchyard/tunnel/testing';
import { TOKEN, startReplicas, startRuntime, until } from './support.ts';

const API_TOKEN = 'api-token-0123456789abcdef';
const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });
const basic = (user: string, password: string): Record<string, string> => ({
  authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`,
});

describe('scheduler API tokens', () => {
  let replicas: SchedulerReplica[] = [];
  const runtimes: RuntimeNode[] = [];
  let standIn: TunnelDialer;
  /** Headers of each request the stand-in runtime was sent, by how it came. */
  const seen: { via: 'stream' | 'relay'; headers: IncomingHttpHeaders }[] = [];

  before(async () => {
    replicas = await startReplicas(2, new MemoryLeaseStore(), undefined, { apiTokens: () => [API_TOKEN] });
    runtimes.push(await startRuntime('r0', replicas[0]!.url), await startRuntime('r1', replicas[1]!.url));
    standIn = dialTunnel({
      url: replicas[0]!.url,
      token: TOKEN,
      info: { id: 'recorder', classes: ['demo'], metadata: {}, version: '1.0.0', limits: {} },
      handler: (req, res) => {
        seen.push({ via: 'stream', headers: req.headers });
        res.end('ok');
      },
      relayHandler: (req, res) => {
        seen.push({ via: 'relay', headers: req.headers });
        res.setHeader('content-length', 2);
        res.end('ok');
      },
    });
    await until('the stand-in runtime connected', () => standIn.connected);
    // Every replica's epoch lists all three runtimes (forwarding between replicas reads the owner from it).
    for (const replica of replicas) {
      await until(`${replica.replicaId} sees every runtime`, async () => {
        const res = await fetch(`${replica.url}/api/runtimes`, { headers: bearer(API_TOKEN) });
        const ids = ((await res.json()) as { runtimes: { id: string }[] }).runtimes.map((r) => r.id);
        return ids.length === 3 || undefined;
      });
    }
  });

  after(async () => {
    void standIn?.close();
    await Promise.all(runtimes.map((r) => r.close()));
    await Promise.all(replicas.map((r) => r.close()));
  });

  it('refuses API calls without a token or with a wrong one, with a Bearer challenge', async () => {
    const url = `${replicas[0]!.url}/api/runtimes`;
    for (const headers of [{}, bearer('wrong-token-0123456789abcd'), basic('x', 'wrong-token-0123456789abcd')]) {
      const res = await fetch(url, { headers });
      assert.equal(res.status, 401);
      assert.equal(res.headers.get('www-authenticate'), 'Bearer realm="switchyard-scheduler"');
      assert.deepEqual(await res.json(), { error: 'missing or invalid API token', code: 'unauthorized' });
    }
    const schedule = await fetch(`${replicas[0]!.url}/api/schedule`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ class: 'demo', processId: 'p' }),
    });
    assert.equal(schedule.status, 401);
    assert.equal((await fetch(`${replicas[0]!.url}/api/proxy/r0/healthz`)).status, 401);
  });

  it('answers with a token, as a bearer or as the password of HTTP Basic', async () => {
    const url = `${replicas[1]!.url}/api/runtimes`;
    for (const headers of [bearer(API_TOKEN), basic('operator', API_TOKEN)]) {
      const res = await fetch(url, { headers });
      assert.equal(res.status, 200);
      const ids = ((await res.json()) as { runtimes: { id: string }[] }).runtimes.map((r) => r.id);
      assert.ok(ids.includes('r0') && ids.includes('r1'), ids.join(','));
    }
    // A replica without an epoch yet would forward a schedule to the leader with the caller's token; with one, it answers.
    const schedule = await fetch(`${replicas[1]!.url}/api/schedule`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...bearer(API_TOKEN) },
      body: JSON.stringify({ class: 'demo', processId: 'p' }),
    });
    assert.equal(schedule.status, 200);
  });

  it('asks a browser on the live page for the token (Basic) and lets it in with it', async () => {
    const refused = await fetch(`${replicas[0]!.url}/ui`);
    assert.equal(refused.status, 401);
    assert.match(refused.headers.get('www-authenticate') ?? '', /^Basic realm="switchyard-scheduler"/);
    await refused.body?.cancel();
    const page = await fetch(`${replicas[0]!.url}/ui`, { headers: basic('', API_TOKEN) });
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /text\/html/);
    await page.body?.cancel();
  });

  it('keeps probes and metrics open, and counts refusals', async () => {
    for (const path of ['/healthz', '/readyz']) assert.equal((await fetch(`${replicas[0]!.url}${path}`)).status, 200);
    const metrics = await (await fetch(`${replicas[0]!.url}/metrics`)).text();
    const refused = Number(/^switchyard_scheduler_api_unauthorized_total (\d+)/m.exec(metrics)?.[1]);
    assert.ok(refused >= 3, `refusals counted: ${refused}`);
  });

  it('forwards a proxied request to the owner replica with the token, which the owner accepts', async () => {
    // r1's tunnel is on s1; s0 forwards.
    const res = await fetch(`${replicas[0]!.url}/api/proxy/r1/healthz`, { headers: bearer(API_TOKEN) });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { status: 'ok' });
  });

  it('guards HTTP/2 streams and relay connections alike', async () => {
    const session = http2.connect(replicas[0]!.url);
    const statusOf = (headers: Record<string, string>): Promise<number> =>
      new Promise((resolve, reject) => {
        const stream = session.request({ ':path': '/api/proxy/recorder/mcp', ...headers });
        stream.on('response', (h) => resolve(Number(h[':status'])));
        stream.once('error', reject);
        stream.resume();
      });
    try {
      assert.equal(await statusOf({}), 401);
      assert.equal(await statusOf(bearer(API_TOKEN)), 200);
    } finally {
      session.close();
    }
    const port = Number(new URL(replicas[0]!.url).port);
    const refused = await askRelay(port, '/api/relay/recorder');
    assert.equal(refused.status, 401);
    refused.socket.destroy();
    const relay = await askRelay(port, '/api/relay/recorder', undefined, bearer(API_TOKEN));
    assert.equal(relay.status, 101);
    try {
      const answer = await exchangeRaw(relay.socket, 'GET /mcp HTTP/1.1\r\nHost: runtime\r\n\r\n');
      assert.equal(answer.status, 200);
    } finally {
      relay.socket.destroy();
    }
  });

  it('never passes the token, nor a cookie of the scheduler origin, on to a runtime', async () => {
    seen.length = 0;
    // What a browser sends there besides the token: a cookie of the origin or its site (a sign-in proxy's).
    const cookie = { cookie: 'sso-session=operator-0123456789' };
    const proxied = await fetch(`${replicas[0]!.url}/api/proxy/recorder/mcp`, {
      headers: { ...bearer(API_TOKEN), ...cookie, 'x-probe': 'http1' },
    });
    assert.equal(proxied.status, 200);
    await proxied.body?.cancel();
    // Forwarded from the other replica: the owner strips it too.
    const forwarded = await fetch(`${replicas[1]!.url}/api/proxy/recorder/mcp`, {
      headers: { ...bearer(API_TOKEN), ...cookie, 'x-probe': 'forwarded' },
    });
    assert.equal(forwarded.status, 200, 'the other replica forwards to the owner');
    await forwarded.body?.cancel();
    const session = http2.connect(replicas[0]!.url);
    try {
      await new Promise<void>((resolve, reject) => {
        const stream = session.request({
          ':path': '/api/proxy/recorder/mcp',
          'x-probe': 'h2',
          ...bearer(API_TOKEN),
          ...cookie,
        });
        stream.once('error', reject).once('end', resolve).resume();
      });
    } finally {
      session.close();
    }
    assert.deepEqual(
      seen.map((s) => [s.via, s.headers['x-probe'], s.headers.authorization, s.headers.cookie]),
      [
        ['stream', 'http1', undefined, undefined],
        ['stream', 'forwarded', undefined, undefined],
        ['stream', 'h2', undefined, undefined],
      ],
    );
  });
});

describe('removing a scheduler API token', () => {
  const OLD = 'api-token-old-0123456789abcdef';
  const NEW = 'api-token-new-0123456789abcdef';
  let accepted: readonly string[] = [OLD, NEW];
  let replica: SchedulerReplica;
  let standIn: TunnelDialer;

  before(async () => {
    replica = (await startReplicas(1, new MemoryLeaseStore(), undefined, { apiTokens: () => accepted }))[0]!;
    standIn = dialTunnel({
      url: replica.url,
      token: TOKEN,
      info: { id: 'holder', classes: ['demo'], metadata: {}, version: '1.0.0', limits: {} },
      // An event stream that stays open until someone ends it.
      handler: (_req, res) => void res.writeHead(200, { 'content-type': 'text/event-stream' }).write(': open\n\n'),
      relayHandler: (_req, res) => {
        res.setHeader('content-length', 2);
        res.end('ok');
      },
    });
    await until('the stand-in runtime connected', () => standIn.connected);
  });

  after(async () => {
    void standIn?.close();
    await replica?.close();
  });

  /** What one token holds open: a relay connection, an HTTP/2 event stream, the live page's event stream. */
  async function holdOpen(token: string) {
    const port = Number(new URL(replica.url).port);
    const relay = await askRelay(port, '/api/relay/holder', undefined, bearer(token));
    assert.equal(relay.status, 101);
    const session = http2.connect(replica.url);
    session.on('error', () => {});
    const stream = session.request({ ':path': '/api/proxy/holder/events', ...bearer(token) });
    stream.on('error', () => {});
    const [head] = (await once(stream, 'response')) as [http2.IncomingHttpHeaders];
    assert.equal(head[':status'], 200);
    const page = await new Promise<IncomingMessage>((resolve, reject) =>
      http.get(`${replica.url}/ui/events`, { headers: bearer(token) }, resolve).once('error', reject),
    );
    assert.equal(page.statusCode, 200);
    page.on('error', () => {}).resume();
    const closed = (emitter: EventEmitter): { done: boolean } => {
      const state = { done: false };
      emitter.once('close', () => (state.done = true));
      return state;
    };
    return {
      relay: relay.socket,
      closed: { relay: closed(relay.socket), stream: closed(stream), page: closed(page) },
      end() {
        relay.socket.destroy();
        session.destroy();
        page.destroy();
      },
    };
  }

  it('closes the relay connections and event streams it let in, within seconds, and nothing else', async () => {
    const old = await holdOpen(OLD);
    const kept = await holdOpen(NEW);
    try {
      accepted = [NEW];
      await until('what the old token let in is closed', () =>
        Object.values(old.closed).every((c) => c.done) ? true : undefined,
      );
      assert.deepEqual(
        Object.values(kept.closed).map((c) => c.done),
        [false, false, false],
        'what the new token let in stays open',
      );
      const answer = await exchangeRaw(kept.relay, 'GET /mcp HTTP/1.1\r\nHost: runtime\r\n\r\n');
      assert.equal(answer.status, 200, 'and carries requests');
      const refused = await askRelay(Number(new URL(replica.url).port), '/api/relay/holder', undefined, bearer(OLD));
      assert.equal(refused.status, 401, 'the old token is refused from then on');
      refused.socket.destroy();
    } finally {
      old.end();
      kept.end();
    }
  });

  it('refuses every new caller once no token is left, instead of opening the API', async () => {
    try {
      accepted = [];
      for (const headers of [{}, bearer(NEW), basic('x', NEW)]) {
        assert.equal((await fetch(`${replica.url}/api/runtimes`, { headers })).status, 401);
      }
      const relay = await askRelay(Number(new URL(replica.url).port), '/api/relay/holder');
      assert.equal(relay.status, 401, 'nor a relay connection without a token');
      relay.socket.destroy();
      assert.equal((await fetch(`${replica.url}/healthz`)).status, 200, 'probes stay open');
    } finally {
      accepted = [NEW];
    }
  });
});
