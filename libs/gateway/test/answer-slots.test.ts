// A principal whose calls fill its concurrency limit still gets its answers
// and notifications through (a sampling answer, a notifications/cancelled:
// the calls wait for them), each counted in an allowance of their own, as
// large; a body that asks anything is refused 429 past the limit as before.
// A DELETE (a client ending its session, which frees what the session holds)
// takes the same allowance; a GET does not.
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createGateway } from '@switchyard/gateway';
import type { Gateway } from '@switchyard/gateway';
import { inspectBody } from '../src/wire.ts';
import { startSchedulerDouble } from './fixtures/scheduler-double.ts';
import type { SchedulerDouble } from './fixtures/scheduler-double.ts';
import { listen, stopServer } from './harness.ts';
import { until } from './until.ts';

const LIMIT = 2;

describe('answers of a principal at its concurrency limit', () => {
  let runtime: Server;
  let scheduler: SchedulerDouble;
  let gateway: Gateway;
  let server: Server;
  let url: string;
  /** Bodies the runtime holds unanswered, in arrival order; `release` answers them all. */
  const held: string[] = [];
  /** The method of each request the runtime got, in arrival order. */
  const methods: string[] = [];
  const answers: Array<() => void> = [];
  const release = (): void => answers.splice(0).forEach((answer) => answer());

  before(async () => {
    runtime = createServer((req, res) => {
      // The gateway's health probes are answered at once, and not counted.
      if (req.url !== '/mcp') return void res.end();
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        methods.push(req.method!);
        held.push(body);
        answers.push(() => {
          res.writeHead(202);
          res.end();
        });
      });
    });
    await new Promise<void>((resolve) => runtime.listen(0, '127.0.0.1', resolve));
    const address = `http://127.0.0.1:${(runtime.address() as AddressInfo).port}`;
    scheduler = await startSchedulerDouble([{ id: 'rt-answers', address }]);
    gateway = createGateway({ schedulers: [scheduler.url], upstreamMode: 'direct', principalConcurrencyMax: LIMIT });
    ({ server, url } = await listen(gateway));
  });
  after(async () => {
    release();
    await stopServer(server);
    await gateway.close();
    runtime.closeAllConnections();
    await new Promise((resolve) => runtime.close(resolve));
    await scheduler.close();
  });

  const send = (body: unknown): Promise<Response> =>
    fetch(url, {
      method: 'POST',
      headers: {
        'mcp-session-id': 'session-a',
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify(body),
    });
  const call = (id: number) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'sleep' } });
  const answer = (id: number) => ({ jsonrpc: '2.0', id, result: { content: [] } });
  const cancelled = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } };

  it('carries them in an allowance as large as the limit, and refuses what asks anything past it', async () => {
    const calls = [send(call(1)), send(call(2))];
    await until(() => held.length === LIMIT, 'the calls at the runtime');
    const replies = [send(answer(100)), send(cancelled)];
    await until(() => held.length === 2 * LIMIT, 'the answers at the runtime');
    assert.deepEqual(
      held.slice(LIMIT).map((b) => JSON.parse(b) as unknown),
      [answer(100), cancelled],
    );
    assert.equal(gateway.stats().inFlight, 2 * LIMIT);

    for (const refused of [call(3), [cancelled, call(4)], answer(101)]) {
      const reply = await send(refused);
      assert.equal(reply.status, 429, JSON.stringify(refused));
      assert.match(await reply.text(), /Too many concurrent requests/);
    }
    assert.equal(held.length, 2 * LIMIT, 'nothing refused reached the runtime');

    release();
    for (const reply of await Promise.all([...calls, ...replies])) assert.equal(reply.status, 202);
    await until(() => gateway.stats().inFlight === 0, 'every slot given back');
  });

  it('carries a DELETE that ends a session in the same allowance, and still refuses a GET past the limit', async () => {
    const before = held.length;
    const session = { 'mcp-session-id': 'session-a' };
    const calls = [send(call(5)), send(call(6))];
    await until(() => held.length === before + LIMIT, 'the calls at the runtime');
    const ended = fetch(url, { method: 'DELETE', headers: session });
    await until(() => held.length === before + LIMIT + 1, 'the DELETE at the runtime');
    assert.equal(methods.at(-1), 'DELETE');

    const stream = await fetch(url, { headers: { ...session, accept: 'text/event-stream' } });
    assert.equal(stream.status, 429);
    await stream.body?.cancel();
    assert.equal(held.length, before + LIMIT + 1, 'the GET did not reach the runtime');

    release();
    for (const reply of await Promise.all([...calls, ended])) assert.equal(reply.status, 202);
    await until(() => gateway.stats().inFlight === 0, 'every slot given back');
  });
});

describe('inspectBody: whether a body asks anything', () => {
  const cases: Array<[string, unknown, boolean]> = [
    ['a request', { jsonrpc: '2.0', id: 1, method: 'tools/list' }, true],
    ['a request whose id the SDK refuses', { jsonrpc: '2.0', id: { x: 1 }, method: 'tools/list' }, true],
    ['a notification', { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } }, false],
    ['an answer', { jsonrpc: '2.0', id: 1, result: {} }, false],
    ['an error answer', { jsonrpc: '2.0', id: 1, error: { code: -1, message: 'no' } }, false],
    [
      'a batch of answers and notifications',
      [
        { jsonrpc: '2.0', id: 1, result: {} },
        { jsonrpc: '2.0', method: 'x' },
      ],
      false,
    ],
    [
      'a batch with a request',
      [
        { jsonrpc: '2.0', method: 'x' },
        { jsonrpc: '2.0', id: 2, method: 'ping' },
      ],
      true,
    ],
  ];
  for (const [name, body, asks] of cases) {
    it(`${asks ? 'asks' : 'asks nothing'}: ${name}`, () => {
      assert.equal(inspectBody(Buffer.from(JSON.stringify(body))).asks, asks);
    });
  }
});
