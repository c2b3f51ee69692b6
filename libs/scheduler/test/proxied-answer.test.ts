// What of a runtime's answer `/api/proxy` passes on: two replicas in one
// process and, on s0, a stand-in runtime that answers with every header a
// browser would act on for the scheduler's whole origin, beside ordinary
// ones and a binary body. Asked on s0 (its tunnel) and on s1 (forwarded to
// s0), over real HTTP on loopback.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { MemoryLeaseStore } from '@switchyard/election';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { dialTunnel, type TunnelDialer } from '@switchyard/tunnel';
import { TOKEN, startReplicas, until } from './support.ts';

/** Headers that act on the origin (or host, or site) the answer comes from, not on the answer. */
const ORIGIN_WIDE: Readonly<Record<string, string>> = {
  'set-cookie': 'operator=runtime-chosen; Path=/; HttpOnly',
  'set-cookie2': 'operator=runtime-chosen; Version=1',
  'clear-site-data': '"cookies", "storage"',
  'strict-transport-security': 'max-age=31536000; includeSubDomains',
  nel: '{"report_to":"collector","max_age":31536000,"include_subdomains":true,"success_fraction":1}',
  'report-to': '{"group":"collector","max_age":31536000,"endpoints":[{"url":"https://collector.example/r"}]}',
  'alt-svc': 'h2="collector.example:443"; ma=86400',
};
/** Headers about this one answer: they pass as the runtime sent them. */
const KEPT: Readonly<Record<string, string>> = {
  'content-type': 'application/octet-stream',
  'cache-control': 'private, max-age=5',
  etag: '"v1"',
  'x-runtime-note': 'kept',
  // A redirect acts on the navigation, not on the origin (see docs/protocol.md).
  refresh: '5; url=/api/proxy/stand-in/next',
};
const BODY = randomBytes(4096);

interface RawAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

function get(url: string): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    http
      .get(url, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.once('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
        res.once('error', reject);
      })
      .once('error', reject);
  });
}

describe("a runtime's answer through /api/proxy", () => {
  let replicas: SchedulerReplica[] = [];
  let standIn: TunnelDialer | undefined;

  before(async () => {
    replicas = await startReplicas(2, new MemoryLeaseStore());
    standIn = dialTunnel({
      url: replicas[0]!.url,
      token: TOKEN,
      info: { id: 'stand-in', classes: ['demo'], metadata: {}, version: '1.0.0', limits: {} },
      handler: (_req, res) => {
        res.writeHead(200, { ...ORIGIN_WIDE, ...KEPT, 'content-length': BODY.length });
        res.end(BODY);
      },
    });
    await until('the stand-in runtime connected', () => standIn!.connected);
    // s1 forwards to the owner it reads from its epoch.
    await until('s1 sees the stand-in', async () => {
      const body = (await (await fetch(`${replicas[1]!.url}/api/runtimes`)).json()) as { runtimes: { id: string }[] };
      return body.runtimes.some((r) => r.id === 'stand-in') || undefined;
    });
  });

  after(async () => {
    await standIn?.close();
    await Promise.all(replicas.map((r) => r.close()));
  });

  for (const [where, index] of [
    ['on the replica holding its tunnel', 0],
    ['forwarded by another replica', 1],
  ] as const) {
    it(`leaves out the headers that act on the scheduler origin, and nothing else, ${where}`, async () => {
      const answer = await get(`${replicas[index]!.url}/api/proxy/stand-in/anything`);
      assert.equal(answer.status, 200);
      for (const name of Object.keys(ORIGIN_WIDE)) assert.equal(answer.headers[name], undefined, `${name} passed`);
      for (const [name, value] of Object.entries(KEPT)) assert.equal(answer.headers[name], value, name);
      assert.equal(answer.headers['content-security-policy'], 'sandbox');
      assert.equal(answer.headers['x-content-type-options'], 'nosniff');
      assert.equal(answer.headers['content-length'], String(BODY.length));
      assert.ok(answer.body.equals(BODY), 'the body arrived byte for byte');
    });
  }
});

// In a rolling upgrade the runtime's owner may be a replica of an earlier
// release, which passes the runtime's answer (and the caller's cookies) as
// they come. The replica the browser asked is the origin they act on: it
// applies the rules itself. Here the owner's advertised URL leads to a
// stand-in for such a replica, which answers as the runtime would through it.
describe("a runtime's answer forwarded from an owner of an earlier release", () => {
  let replicas: SchedulerReplica[] = [];
  let standIn: TunnelDialer | undefined;
  let olderOwner: http.Server | undefined;
  /** The Cookie header of each request the older owner was sent. */
  const cookiesSeen: (string | undefined)[] = [];

  before(async () => {
    olderOwner = http.createServer((req, res) => {
      cookiesSeen.push(req.headers.cookie);
      req.resume();
      res.writeHead(200, { ...ORIGIN_WIDE, ...KEPT, 'content-length': BODY.length });
      res.end(BODY);
    });
    await new Promise<void>((resolve) => olderOwner!.listen(0, '127.0.0.1', resolve));
    const { port } = olderOwner.address() as AddressInfo;
    const store = new MemoryLeaseStore();
    // s1 leads, so s0's advertised URL is dialled for forwards only, never for the epoch sync.
    const [s1] = await startReplicas(1, store, undefined, { replicaId: 's1' });
    await until('s1 leads', () => s1!.isLeader || undefined);
    const [s0] = await startReplicas(1, store, undefined, {
      replicaId: 's0',
      advertiseUrl: `http://127.0.0.1:${port}`,
    });
    replicas = [s0!, s1!];
    // s0.url is the advertised one: the runtime dials where s0 listens.
    standIn = dialTunnel({
      url: `http://127.0.0.1:${s0!.port}`,
      token: TOKEN,
      info: { id: 'stand-in', classes: ['demo'], metadata: {}, version: '1.0.0', limits: {} },
      handler: (_req, res) => res.end(),
    });
    await until('s1 sees the stand-in, owned by s0', async () => {
      const body = (await (await fetch(`${s1!.url}/api/runtimes`)).json()) as {
        runtimes: { id: string; owner: string }[];
      };
      return body.runtimes.some((r) => r.id === 'stand-in' && r.owner === 's0') || undefined;
    });
  });

  after(async () => {
    await standIn?.close();
    await Promise.all(replicas.map((r) => r.close()));
    await new Promise((resolve) => olderOwner?.close(resolve));
  });

  it('leaves out the headers that act on the origin, sets the policy, and sends the owner no cookie', async () => {
    const answer = await new Promise<RawAnswer>((resolve, reject) => {
      http
        .get(
          `${replicas[1]!.url}/api/proxy/stand-in/anything`,
          { headers: { cookie: 'sso-session=operator-0123' } },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (chunk: Buffer) => chunks.push(chunk));
            res.once('end', () =>
              resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }),
            );
            res.once('error', reject);
          },
        )
        .once('error', reject);
    });
    assert.equal(answer.status, 200);
    assert.deepEqual(cookiesSeen, [undefined], 'the owner was sent no cookie');
    for (const name of Object.keys(ORIGIN_WIDE)) assert.equal(answer.headers[name], undefined, `${name} passed`);
    for (const [name, value] of Object.entries(KEPT)) assert.equal(answer.headers[name], value, name);
    assert.equal(answer.headers['content-security-policy'], 'sandbox');
    assert.equal(answer.headers['x-content-type-options'], 'nosniff');
    assert.ok(answer.body.equals(BODY), 'the body arrived byte for byte');
  });
});
