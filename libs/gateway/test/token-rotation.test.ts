// A gateway whose schedulerToken and upstreamToken are functions (a token
// file read again when it changes) presents the token of the moment, with
// no restart: on scheduling calls, on each new relay connection's upgrade,
// on each HTTP/2 event stream, and on direct requests to a runtime. What it
// is given that is no token keeps the last good one and is logged, once.
// A loopback stand-in for a scheduler replica (and one for a runtime's
// direct listener) records the Authorization of everything it is sent.
// Each gateway runs on a clock that stands still: a schedule ask unanswered
// for SCHEDULE_HEDGE_MS is asked again (a hedge, on a loaded machine) and
// an upstream held open is checked with `GET /healthz`, both by that clock,
// so the stand-ins record only the calls of the requests the test sends.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from '@switchyard/clock/testing';
import { createGateway, type Gateway, type GatewayOptions } from '@switchyard/gateway';
import { serveH2c, type H2cListener } from '@switchyard/service';
import { listen, stopServer } from './harness.ts';

const A = 'scheduler-token-a-0123456789';
const B = 'scheduler-token-b-0123456789';
const LEGACY = '2025-11-25';
const STATELESS = '2026-07-28';

interface StandIn {
  readonly url: string;
  /** `<what> <authorization or "none">`, in arrival order. */
  readonly seen: string[];
  /** Answers the relayed requests held so far (those of method `hold`). */
  release(): void;
  close(): Promise<void>;
}

/**
 * A scheduler replica as the gateway sees one. Every relayed answer closes
 * its connection, so each request dials anew, but one of method `hold` is
 * answered only on `release()`: its connection keeps the relay's pool alive.
 */
async function schedulerStandIn(address?: string): Promise<StandIn> {
  const seen: string[] = [];
  const held: http.ServerResponse[] = [];
  const auth = (value: string | string[] | undefined): string => String(value ?? 'none');
  const answer = (res: http.ServerResponse): void =>
    void res.writeHead(200, { 'content-type': 'application/json', connection: 'close' }).end('{}');
  const runtime = http.createServer((req, res) => {
    seen.push(`relayed ${auth(req.headers.authorization)}`);
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.once('end', () => (body.includes('"hold"') ? held.push(res) : answer(res)));
  });
  const server = http.createServer((req, res) => {
    req.resume();
    if (req.url !== '/api/schedule') {
      seen.push(`proxy ${auth(req.headers.authorization)}`);
      return void res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    }
    seen.push(`schedule ${auth(req.headers.authorization)}`);
    const placement = { ok: true, runtime: 'rt', proxyUrl: `${url}/api/proxy/rt`, ...(address ? { address } : {}) };
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(placement));
  });
  const sockets = new Set<Socket>();
  server.on('upgrade', (req, socket: Socket) => {
    seen.push(`relay ${auth(req.headers.authorization)}`);
    sockets.add(socket);
    socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: switchyard-relay\r\n\r\n');
    runtime.emit('connection', socket);
  });
  const h2c: H2cListener = serveH2c(server, {
    maxConcurrentStreams: 100,
    onStream: (stream, headers) => {
      seen.push(`stream ${auth(headers.authorization)}`);
      stream.respond({ ':status': 200, 'content-type': 'text/event-stream' });
      stream.end(': bye\n\n');
    },
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    seen,
    release: () => held.splice(0).forEach(answer),
    async close() {
      for (const socket of sockets) socket.destroy();
      await h2c.close(100);
      await stopServer(server);
    },
  };
}

/** A runtime's direct listener as the gateway sees one. */
async function directStandIn(): Promise<StandIn> {
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    seen.push(`direct ${req.headers.authorization ?? 'none'}`);
    req.resume();
    req.once('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, seen, release() {}, close: () => stopServer(server) };
}

function recordingLogger(): { logs: { level: string; msg: string; fields: object }[] } & GatewayOptions['logger'] {
  const logs: { level: string; msg: string; fields: object }[] = [];
  const at =
    (level: string) =>
    (fields: object, msg = ''): void =>
      void logs.push({ level, msg, fields });
  return { logs, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

/** One stateless POST (through a scheduler: on a relay) and its status. */
async function post(url: string, method = 'tools/list'): Promise<number> {
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': STATELESS,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: {} }),
  });
  await res.arrayBuffer();
  return res.status;
}

/** One event stream of a legacy session (through a scheduler: an HTTP/2 stream) and its status. */
async function stream(url: string, session: string): Promise<number> {
  const res = await fetch(url, {
    headers: { accept: 'text/event-stream', 'mcp-protocol-version': LEGACY, 'mcp-session-id': session },
  });
  await res.arrayBuffer();
  return res.status;
}

describe('a gateway given its scheduler token as a function', () => {
  let scheduler: StandIn;
  let gateway: Gateway;
  let server: http.Server;
  let url: string;
  let current: string | undefined = A;
  let asked = 0;
  const logger = recordingLogger();
  before(async () => {
    scheduler = await schedulerStandIn();
    gateway = createGateway({
      schedulers: [scheduler.url],
      clock: new ManualClock(),
      schedulerToken: () => (asked++, current),
      logger,
    });
    ({ server, url } = await listen(gateway));
  });
  after(async () => {
    await stopServer(server);
    await gateway.close();
    await scheduler.close();
  });

  it('presents the token of the moment on scheduling calls, new relays and event streams', async () => {
    assert.equal(await post(url), 200);
    assert.equal(await stream(url, 'session-1'), 200);
    assert.deepEqual(scheduler.seen.splice(0), [
      `schedule Bearer ${A}`,
      `relay Bearer ${A}`,
      'relayed none',
      `schedule Bearer ${A}`,
      `stream Bearer ${A}`,
    ]);
    // A request in flight keeps its relay open across the change, and so the relay's pool.
    const held = post(url, 'hold');
    for (let i = 0; scheduler.seen.length < 3 && i < 1000; i++) await new Promise((r) => setTimeout(r, 5));
    const before = asked;
    current = B;
    assert.equal(await post(url), 200);
    assert.equal(await stream(url, 'session-2'), 200);
    scheduler.release();
    assert.equal(await held, 200);
    assert.deepEqual(scheduler.seen.splice(0), [
      `schedule Bearer ${A}`,
      `relay Bearer ${A}`,
      'relayed none',
      `schedule Bearer ${B}`,
      `relay Bearer ${B}`,
      'relayed none',
      `schedule Bearer ${B}`,
      `stream Bearer ${B}`,
    ]);
    assert.ok(asked > before, 'asked again after the change');
    const changed = logger.logs.filter((l) => l.msg === 'schedulerToken changed: schedulers are presented the new one');
    assert.equal(changed.length, 1);
    assert.equal(JSON.stringify(logger.logs).includes(B), false, 'the token is never logged');
  });

  it('keeps the last good token when it is given none or a bad one, and says so once per change', async () => {
    current = B;
    const errors = (): string[] => logger.logs.filter((l) => l.level === 'error').map((l) => l.msg);
    for (const bad of [undefined, 'too-short', 'has a space in it 0123456789']) {
      current = bad;
      assert.equal(await post(url), 200);
      assert.equal(await post(url), 200);
    }
    assert.deepEqual(
      scheduler.seen.splice(0).filter((s) => !s.startsWith('relayed ')),
      Array.from({ length: 6 }, () => [`schedule Bearer ${B}`, `relay Bearer ${B}`]).flat(),
    );
    assert.deepEqual(errors(), [
      'schedulerToken has no token: schedulers are still presented the last good one',
      'schedulerToken has a token that is not at least 16 visible ASCII characters: schedulers are still presented the last good one',
      'schedulerToken has a token that is not at least 16 visible ASCII characters: schedulers are still presented the last good one',
    ]);
    assert.equal(JSON.stringify(logger.logs).includes('too-short'), false, 'not even a bad token is logged');
    current = B;
  });
});

describe('a gateway whose scheduler token function has none at start', () => {
  it('says so at once, goes without one, and presents the first good one it is given', async () => {
    const scheduler = await schedulerStandIn();
    const logger = recordingLogger();
    let current: string | undefined;
    const gateway = createGateway({
      schedulers: [scheduler.url],
      clock: new ManualClock(),
      schedulerToken: () => current,
      logger,
    });
    const { server, url } = await listen(gateway);
    try {
      assert.deepEqual(
        logger.logs.map((l) => `${l.level} ${l.msg}`),
        ['error schedulerToken has no token: requests to schedulers go without one'],
      );
      assert.equal(await post(url), 200);
      current = A;
      assert.equal(await post(url), 200);
      assert.deepEqual(
        scheduler.seen.filter((s) => !s.startsWith('relayed')),
        ['schedule none', 'relay none', `schedule Bearer ${A}`, `relay Bearer ${A}`],
      );
    } finally {
      await stopServer(server);
      await gateway.close();
      await scheduler.close();
    }
  });

  it('refuses a fixed token that breaks the rule at creation', () => {
    assert.throws(
      () => createGateway({ schedulers: ['http://127.0.0.1:1'], schedulerToken: 'short' }),
      /schedulerToken must be at least 16 visible ASCII characters/,
    );
    assert.throws(
      () => createGateway({ schedulers: ['http://127.0.0.1:1'], upstreamToken: 'two words' }),
      /upstreamToken must be visible ASCII characters only/,
    );
  });
});

describe('a gateway whose scheduler token function reads a file', () => {
  it('names the file in what it logs of the tokens it is given, never the token', async () => {
    const scheduler = await schedulerStandIn();
    const logger = recordingLogger();
    const file = '/run/secrets/gateway/scheduler-token';
    let current: string | undefined;
    const gateway = createGateway({
      schedulers: [scheduler.url],
      clock: new ManualClock(),
      schedulerToken: Object.assign(() => current, { file }),
      logger,
    });
    const { server, url } = await listen(gateway);
    try {
      current = A;
      assert.equal(await post(url), 200);
      current = 'too-short';
      assert.equal(await post(url), 200);
      assert.deepEqual(
        logger.logs.map((l) => [l.level, l.msg, l.fields]),
        [
          [
            'error',
            `schedulerToken from ${file} has no token: requests to schedulers go without one`,
            { option: 'schedulerToken', file },
          ],
          ['info', 'schedulerToken changed: schedulers are presented the new one', { option: 'schedulerToken', file }],
          [
            'error',
            `schedulerToken from ${file} has a token that is not at least 16 visible ASCII characters: schedulers are still presented the last good one`,
            { option: 'schedulerToken', file },
          ],
        ],
      );
      assert.equal(/too-short|scheduler-token-a-/.test(JSON.stringify(logger.logs)), false, 'no token is logged');
    } finally {
      await stopServer(server);
      await gateway.close();
      await scheduler.close();
    }
  });
});

describe('a gateway in direct mode given its upstream token as a function', () => {
  it('presents the token of the moment to runtimes, and never the scheduler token', async () => {
    const runtime = await directStandIn();
    const scheduler = await schedulerStandIn(runtime.url);
    let current = 'upstream-token-old';
    const gateway = createGateway({
      schedulers: [scheduler.url],
      upstreamMode: 'direct',
      clock: new ManualClock(),
      upstreamToken: () => current,
      schedulerToken: A,
    });
    const { server, url } = await listen(gateway);
    try {
      assert.equal(await post(url), 200);
      current = 'upstream-token-new';
      assert.equal(await post(url), 200);
      assert.deepEqual(runtime.seen, ['direct Bearer upstream-token-old', 'direct Bearer upstream-token-new']);
      assert.deepEqual(scheduler.seen, [`schedule Bearer ${A}`, `schedule Bearer ${A}`]);
    } finally {
      await stopServer(server);
      await gateway.close();
      await scheduler.close();
      await runtime.close();
    }
  });
});

// Runtimes take an upstream token of any length, so a gateway presents a
// short one still (refusing it would cut off deployments that run with
// one), but says, where schedulers and gateways hold theirs to 16
// characters, that it is guessed easily: at start, and each time its file
// gives another.
describe('a gateway whose upstream token is shorter than 16 characters', () => {
  const warnings = (logger: ReturnType<typeof recordingLogger>) =>
    logger.logs.filter((l) => l.level === 'warn').map((l) => [l.msg, l.fields]);

  it('warns once at start of a fixed one, naming the option, and presents it', async () => {
    const runtime = await directStandIn();
    const scheduler = await schedulerStandIn(runtime.url);
    const logger = recordingLogger();
    const gateway = createGateway({
      schedulers: [scheduler.url],
      upstreamMode: 'direct',
      clock: new ManualClock(),
      upstreamToken: 'up-7x',
      logger,
    });
    const { server, url } = await listen(gateway);
    try {
      assert.equal(await post(url), 200);
      assert.equal(await post(url), 200);
      assert.deepEqual(runtime.seen, ['direct Bearer up-7x', 'direct Bearer up-7x']);
      assert.deepEqual(warnings(logger), [
        [
          'upstreamToken is shorter than 16 characters: runtimes take it, but a short token is guessed easily',
          { option: 'upstreamToken' },
        ],
      ]);
    } finally {
      await stopServer(server);
      await gateway.close();
      await scheduler.close();
      await runtime.close();
    }
  });

  it('warns of each short one its file gives, naming the file, never the token', async () => {
    const runtime = await directStandIn();
    const scheduler = await schedulerStandIn(runtime.url);
    const logger = recordingLogger();
    const file = '/run/secrets/gateway/upstream-token';
    let current = 'up-7x';
    const gateway = createGateway({
      schedulers: [scheduler.url],
      upstreamMode: 'direct',
      clock: new ManualClock(),
      upstreamToken: Object.assign(() => current, { file }),
      logger,
    });
    const { server, url } = await listen(gateway);
    try {
      assert.equal(await post(url), 200);
      current = 'up-8y';
      assert.equal(await post(url), 200);
      current = 'upstream-token-long-enough';
      assert.equal(await post(url), 200);
      const warned = [
        `upstreamToken from ${file} is shorter than 16 characters: runtimes take it, but a short token is guessed easily`,
        { option: 'upstreamToken', file },
      ];
      assert.deepEqual(warnings(logger), [warned, warned]);
      assert.equal(/up-7x|up-8y/.test(JSON.stringify(logger.logs)), false, 'no token is logged');
    } finally {
      await stopServer(server);
      await gateway.close();
      await scheduler.close();
      await runtime.close();
    }
  });
});
