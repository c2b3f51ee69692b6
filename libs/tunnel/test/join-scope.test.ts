// Join tokens scoped to runtime ids (`<token> <id pattern>`) and the rule that a runtime id connected with one
// token is not taken over by another: a real endpoint on loopback and real dialers.
import { after, afterEach, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type http2 from 'node:http2';
import net from 'node:net';
import { joinTokenLineProblem, parseJoinTokens } from '../src/join-scope.ts';
import { dialTunnel, type TunnelDialer } from '../src/index.ts';
import {
  TOKEN,
  encodeInfo,
  rawConnect,
  readStream,
  runtimeInfo,
  startRuntime,
  startScheduler,
  until,
} from './helpers.ts';
import type { Scheduler } from './helpers.ts';

const GPU = 'gpu-scoped-token-0123456789';
const OTHER = 'other-join-token-0123456789';

const hello = (_req: http2.Http2ServerRequest, res: http2.Http2ServerResponse): void => void res.end('hello');

/** A raw connect as `id` with `token`: the status, and the JSON body of a refusal. */
function connect(scheduler: Scheduler, token: string, id: string): Promise<{ status: number; body: string }> {
  return rawConnect(scheduler, { authorization: `Bearer ${token}`, 'x-runtime-info': encodeInfo(runtimeInfo(id)) });
}

/** A TCP front to `port` that can stop carrying its connections without closing them (a NAT that forgot them). */
async function freezableFront(port: number) {
  const links: { frozen: boolean }[] = [];
  const server = net.createServer((client) => {
    const upstream = net.connect({ host: '127.0.0.1', port });
    const link = { frozen: false };
    links.push(link);
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      from.on('error', () => {});
      from.on('data', (chunk) => !link.frozen && to.write(chunk));
      from.on('close', () => !link.frozen && to.destroy());
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    freeze: () => links.forEach((l) => (l.frozen = true)),
    close: () => {
      server.close();
    },
  };
}

describe('join token lines', () => {
  const table: [line: string, admitted: string[], refused: string[]][] = [
    ['tok', ['any', 'gpu-1'], []],
    ['tok gpu-*', ['gpu-', 'gpu-1', 'gpu-a.b'], ['cpu-1', 'xgpu-1', 'GPU-1']],
    ['tok *.eu-west', ['a.eu-west'], ['aXeu-west', 'a.eu-west.x']],
    ['tok node-7', ['node-7'], ['node-70', 'node-']],
    ['tok  a*b*c', ['abc', 'a-b-c'], ['ab', 'acb']],
    ['tok gpu-* extra', [], ['gpu-1', 'any']],
    ['tok gpu-[0-9]', [], ['gpu-1', 'gpu-[0-9]']],
  ];
  for (const [line, admitted, refused] of table) {
    it(`"${line}" admits ${admitted.join(', ') || 'no id'} and refuses ${refused.join(', ') || 'none'}`, () => {
      const [token] = parseJoinTokens([line]);
      assert.equal(token!.token, 'tok');
      for (const id of admitted) assert.equal(token!.admits(id), true, id);
      for (const id of refused) assert.equal(token!.admits(id), false, id);
    });
  }

  it('names what is wrong with a malformed line, and nothing for a well formed one', () => {
    assert.equal(joinTokenLineProblem('tok'), undefined);
    assert.equal(joinTokenLineProblem('tok gpu-*'), undefined);
    assert.match(joinTokenLineProblem('tok gpu-* extra')!, /one runtime id pattern/);
    assert.match(joinTokenLineProblem('tok gpu-?')!, /pattern/);
  });
});

describe('a runtime id and the join token it connected with', () => {
  let scheduler: Scheduler;
  let tokens: readonly string[] = [TOKEN, `${GPU} gpu-*`, OTHER];
  const dialers: TunnelDialer[] = [];
  before(async () => {
    scheduler = await startScheduler({ tokens: () => tokens });
  });
  afterEach(() => {
    for (const d of dialers.splice(0)) void d.close();
  });
  after(() => scheduler.close());

  it("refuses an id outside its token's pattern with 403 naming the id, never the token", async () => {
    const refused = await connect(scheduler, GPU, 'cpu-1');
    assert.equal(refused.status, 403);
    assert.deepEqual(JSON.parse(refused.body), {
      error: 'join token does not admit this runtime id',
      runtime: 'cpu-1',
    });
    assert.ok(scheduler.logs.some((l) => l.msg === 'runtime connect refused' && 'runtime' in l.obj));
    assert.doesNotMatch(JSON.stringify(scheduler.logs), new RegExp(GPU));
    const gpu = await startRuntime(scheduler, 'gpu-1', hello, { token: GPU });
    dialers.push(gpu.dialer);
    assert.equal((await readStream(gpu.tunnel.request({ ':path': '/' }))).status, 200);
  });

  it('admits any id with a token without a pattern, as before patterns', async () => {
    for (const id of ['cpu-2', 'gpu-2']) dialers.push((await startRuntime(scheduler, id, hello)).dialer);
    assert.ok(scheduler.endpoint.get('cpu-2') && scheduler.endpoint.get('gpu-2'));
  });

  it('tries no other transport after a 403 and dials again only at the maximum delay', async () => {
    const before = scheduler.connects.count;
    const dialer = dialTunnel({
      url: scheduler.url,
      token: GPU,
      info: runtimeInfo('cpu-3'),
      handler: hello,
      backoff: { initialMs: 10, maxMs: 60_000 },
    });
    dialers.push(dialer);
    await until(() => scheduler.connects.count > before);
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(scheduler.connects.count, before + 1, 'one connect: no WebSocket fallback, no quick redial');
  });

  it('refuses with 409 an id connected with another token while its tunnel is open, and says so', async () => {
    const first = await startRuntime(scheduler, 'rt-held', hello);
    dialers.push(first.dialer);
    const claim = await connect(scheduler, OTHER, 'rt-held');
    assert.equal(claim.status, 409);
    assert.deepEqual(JSON.parse(claim.body), {
      error: 'runtime id connected with another join token',
      runtime: 'rt-held',
    });
    assert.equal(scheduler.endpoint.get('rt-held'), first.tunnel);
    assert.equal(first.tunnel.closed, false);
    const said = scheduler.logs.find((l) => l.msg === 'runtime connect refused: id held by another join token');
    assert.equal(said?.level, 'warn');
    assert.deepEqual(said.obj, {
      remote: '127.0.0.1',
      runtime: 'rt-held',
      status: 409,
      error: 'runtime id connected with another join token',
    });
    first.tunnel.close('gone');
    await first.tunnel.whenClosed;
    await until(() => scheduler.endpoint.get('rt-held') === undefined);
    assert.equal((await connect(scheduler, OTHER, 'rt-held')).status, 101, 'once it closed, any admitted token');
  });

  it('lets the same token take over a tunnel that went silent, before the endpoint found it dead', async () => {
    const front = await freezableFront(scheduler.port);
    try {
      // The runtime redials past the frozen front: one process, so both dials name its instance.
      const instance = 'rt-blip-instance-0123';
      const old = await startRuntime(scheduler, 'rt-blip', hello, { url: front.url, transport: 'http2', instance });
      dialers.push(old.dialer);
      front.freeze();
      assert.equal((await connect(scheduler, OTHER, 'rt-blip')).status, 409, 'still held for another token');
      const back = await startRuntime(scheduler, 'rt-blip', hello, { instance });
      dialers.push(back.dialer);
      assert.match(await old.tunnel.whenClosed, /replaced/);
      assert.equal(scheduler.endpoint.get('rt-blip'), back.tunnel);
      assert.equal((await readStream(back.tunnel.request({ ':path': '/' }))).status, 200);
    } finally {
      front.close();
    }
  });

  it('closes a tunnel whose token a reloaded list narrows away from its id, and keeps those still admitted', async () => {
    const leaving = await startRuntime(scheduler, 'gpu-10', hello, { token: GPU });
    const staying = await startRuntime(scheduler, 'gpu-20', hello, { token: GPU });
    dialers.push(leaving.dialer, staying.dialer);
    tokens = [TOKEN, `${GPU} gpu-2*`, OTHER];
    assert.equal(await leaving.tunnel.whenClosed, 'join token no longer admits this runtime id');
    assert.ok(scheduler.logs.some((l) => l.msg === 'tunnel closed: its join token no longer admits its runtime id'));
    assert.equal(scheduler.endpoint.get('gpu-20'), staying.tunnel);
    assert.equal(staying.tunnel.closed, false);
    assert.equal((await connect(scheduler, GPU, 'gpu-10')).status, 403, 'and refuses it on redial');
  });
});
