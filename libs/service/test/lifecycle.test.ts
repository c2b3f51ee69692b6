import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { createServer, get, request } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { ManualClock, flushMicrotasks, within } from '@switchyard/clock/testing';
import { sleep } from '@switchyard/clock';
import { closeServer, createLifecycle, listen } from '@switchyard/service';
import { certificateFor127 } from '@switchyard/service/testing';
import type { Lifecycle, LifecycleLogger } from '@switchyard/service';

const certificate = certificateFor127();
const quiet: LifecycleLogger = { info() {}, warn() {}, error() {} };
const opened: Server[] = [];
/** Client connections a test opens by hand, closed after it whatever became of them. */
const dialled: net.Socket[] = [];
afterEach(() => {
  for (const socket of dialled.splice(0)) socket.destroy();
  const servers = opened.splice(0);
  for (const s of servers) s.closeAllConnections();
  for (const s of servers) s.close();
});

async function serve(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ server: Server; url: string }> {
  const server = createServer(handler);
  opened.push(server);
  const address = await listen(server, { host: '127.0.0.1', port: 0 });
  return { server, url: `http://127.0.0.1:${address.port}` };
}

function status(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    get(url, { agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    }).on('error', reject);
  });
}

function probeServer(lc: Lifecycle, extra?: (req: IncomingMessage, res: ServerResponse) => boolean) {
  return serve((req, res) => {
    if (req.url === '/healthz') return lc.healthzHandler(req, res);
    if (req.url === '/readyz') return lc.readyzHandler(req, res);
    if (extra?.(req, res)) return;
    res.writeHead(404).end();
  });
}

describe('probes', () => {
  it('readyz is 503 until markReady and healthz is 200 throughout', async () => {
    const lc = createLifecycle({ logger: quiet, clock: new ManualClock() });
    const { url } = await probeServer(lc);
    assert.equal(await status(`${url}/readyz`), 503);
    assert.equal(await status(`${url}/healthz`), 200);
    lc.markReady();
    assert.equal(await status(`${url}/readyz`), 200);
  });

  it('readyz is 503 with the reason of a failing readiness check, healthz 200 regardless', async () => {
    const lc = createLifecycle({ logger: quiet, clock: new ManualClock() });
    let connected = false;
    lc.addReadinessCheck(() => (connected ? undefined : 'disconnected'));
    lc.markReady();
    const { url } = await probeServer(lc);
    const body = async (): Promise<unknown> => (await fetch(`${url}/readyz`)).json();
    assert.equal(await status(`${url}/readyz`), 503);
    assert.deepEqual(await body(), { status: 'disconnected' });
    assert.equal(await status(`${url}/healthz`), 200);
    connected = true;
    assert.equal(await status(`${url}/readyz`), 200);
    assert.deepEqual(await body(), { status: 'ready' });
  });

  it('readyz turns 503 at the start of a drain while the listener still accepts, then the listener closes', async () => {
    const clock = new ManualClock();
    const lc = createLifecycle({ logger: quiet, clock, drainDelayMs: 5000, shutdownTimeoutMs: 30000 });
    const { server, url } = await probeServer(lc);
    lc.addServer(server);
    lc.markReady();
    const done = lc.shutdown('test');
    assert.equal(lc.draining, true);
    assert.equal(await status(`${url}/readyz`), 503);
    assert.equal(await status(`${url}/healthz`), 200);
    await clock.advance(4999);
    assert.equal(server.listening, true, 'still accepting during the drain delay');
    lc.markReady();
    assert.equal(await status(`${url}/readyz`), 503, 'markReady cannot undo a drain');
    await clock.advance(1);
    assert.deepEqual(await done, { forced: false, hooksOk: true });
    assert.equal(server.listening, false);
    assert.equal(lc.state, 'stopped');
    await assert.rejects(status(`${url}/healthz`), /ECONNREFUSED/);
  });

  it('shutdown is idempotent', async () => {
    const clock = new ManualClock();
    const lc = createLifecycle({ logger: quiet, clock, drainDelayMs: 0 });
    assert.equal(lc.shutdown(), lc.shutdown());
    await clock.advance(0);
    assert.deepEqual(await lc.shutdown(), { forced: false, hooksOk: true });
  });
});

describe('shutdown hooks', () => {
  it('run in reverse registration order after the servers closed', async () => {
    const clock = new ManualClock();
    const lc = createLifecycle({ logger: quiet, clock, drainDelayMs: 10 });
    const { server } = await serve((_q, r) => r.end());
    lc.addServer(server);
    const order: string[] = [];
    lc.onShutdown(() => void order.push(`first listening=${server.listening}`));
    lc.onShutdown(async () => void order.push('second'));
    const done = lc.shutdown();
    await clock.advance(10);
    assert.deepEqual(await done, { forced: false, hooksOk: true });
    assert.deepEqual(order, ['second', 'first listening=false']);
  });

  it('servers-closing hooks run once the servers stop accepting, so what they end is not waited for until the deadline', async () => {
    const clock = new ManualClock();
    const errors: string[] = [];
    const logger = { ...quiet, error: (_o: object, msg?: string) => void errors.push(msg ?? '') };
    const lc = createLifecycle({ logger, clock, drainDelayMs: 10, shutdownTimeoutMs: 30_000 });
    const streams: ServerResponse[] = [];
    const { server, url } = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(': open\n\n');
      streams.push(res);
    });
    lc.addServer(server);
    // The client has the head, so the server holds the stream.
    const stream = await new Promise<IncomingMessage>((resolve, reject) => {
      get(url, { agent: false }, resolve).on('error', reject);
    });
    const streamEnded = new Promise<void>((resolve, reject) => {
      stream.on('end', resolve).on('error', reject);
      stream.resume();
    });
    assert.equal(streams.length, 1);
    const order: string[] = [];
    lc.onServersClosing(() => {
      throw new Error('boom');
    });
    lc.onServersClosing(() => {
      order.push(`closing listening=${server.listening}`);
      for (const res of streams) res.end();
    });
    lc.onShutdown(() => void order.push('shutdown'));
    const done = lc.shutdown();
    await clock.advance(10);
    assert.deepEqual(await done, { forced: false, hooksOk: true });
    await streamEnded;
    assert.deepEqual(order, ['closing listening=false', 'shutdown']);
    assert.deepEqual(errors, ['servers-closing hook failed']);
  });

  it('drain hooks run when the drain starts, before its delay; one that throws keeps neither the others nor the shutdown', async () => {
    const clock = new ManualClock();
    const errors: string[] = [];
    const logger = { ...quiet, error: (_o: object, msg?: string) => void errors.push(msg ?? '') };
    const lc = createLifecycle({ logger, clock, drainDelayMs: 5000 });
    const order: string[] = [];
    lc.onDrain(() => {
      throw new Error('boom');
    });
    lc.onDrain(() => void order.push(`drain state=${lc.state}`));
    lc.onShutdown(() => void order.push('shutdown'));
    const done = lc.shutdown();
    assert.deepEqual(order, ['drain state=draining']);
    assert.deepEqual(errors, ['drain hook failed']);
    await clock.advance(5000);
    assert.deepEqual(await done, { forced: false, hooksOk: true });
    assert.deepEqual(order, ['drain state=draining', 'shutdown']);
  });

  it('a drain ends before its delay once every promise of the drain hooks resolved, but not on one that rejected', async () => {
    for (const outcome of ['resolve', 'reject'] as const) {
      const clock = new ManualClock();
      const lc = createLifecycle({ logger: quiet, clock, drainDelayMs: 5000 });
      const { server } = await serve((_q, r) => r.end());
      lc.addServer(server);
      let settle!: () => void;
      lc.onDrain(() => new Promise<void>((resolve, reject) => (settle = outcome === 'resolve' ? resolve : reject)));
      lc.onDrain(() => {});
      const done = lc.shutdown();
      await clock.advance(1000);
      assert.equal(server.listening, true, 'draining while the hook has not settled');
      settle();
      await flushMicrotasks();
      await clock.advance(0);
      if (outcome === 'resolve') {
        const settled = await Promise.race([done, new Promise((r) => setTimeout(r, 1000, 'still draining'))]);
        assert.deepEqual(settled, { forced: false, hooksOk: true }, 'stopped at once when drained');
        assert.equal(server.listening, false);
      } else {
        await clock.advance(3999);
        assert.equal(server.listening, true, `${outcome}: the full delay still runs`);
        await clock.advance(1);
        assert.deepEqual(await done, { forced: false, hooksOk: true });
      }
    }
  });

  it('have until the shutdown deadline as time passes, though the wall clock was set forward meanwhile', async () => {
    const clock = new ManualClock();
    const lc = createLifecycle({ logger: quiet, clock, drainDelayMs: 10, shutdownTimeoutMs: 1000 });
    let lastRan = false;
    lc.onShutdown(() => sleep(clock, 100).then(() => void (lastRan = true)));
    lc.onShutdown(() => {
      clock.stepWall(3_600_000); // NTP, or an operator, sets the clock forward an hour as the first hook runs
      return sleep(clock, 500);
    });
    const done = lc.shutdown();
    await clock.advance(10 + 500 + 100);
    assert.deepEqual(await done, { forced: false, hooksOk: true });
    assert.equal(lastRan, true, 'the last hook had 500 ms of its 1,000 left, not none');
  });

  const failures = [
    { name: 'a throwing hook is reported and later hooks still run', hook: () => Promise.reject(new Error('boom')) },
    { name: 'a hook still running at the deadline is abandoned', hook: () => new Promise<void>(() => {}) },
  ];
  for (const f of failures) {
    it(f.name, async () => {
      const clock = new ManualClock();
      const lc = createLifecycle({ logger: quiet, clock, drainDelayMs: 0, shutdownTimeoutMs: 100 });
      let earlier = false;
      lc.onShutdown(() => void (earlier = true));
      lc.onShutdown(f.hook);
      const done = lc.shutdown();
      await clock.advance(100);
      const result = await done;
      assert.equal(result.hooksOk, false);
      assert.equal(earlier, f.name.includes('throwing'), 'later hooks run after a throw, not after a hang');
    });
  }
});

/** A lifecycle draining 1 s on `signals`, with the exit codes it asked for. */
function signalled<S extends EventEmitter>(signals: S) {
  const clock = new ManualClock();
  const codes: number[] = [];
  const lc = createLifecycle({
    logger: quiet,
    clock,
    drainDelayMs: 1000,
    signals: signals as never,
    exit: (code) => void codes.push(code),
  });
  return { clock, signals, codes, lc };
}

describe('signal handlers', () => {
  it('SIGTERM drains then exits 0; a second signal exits 1 at once; uninstall removes the listeners', async () => {
    const { clock, signals, codes, lc } = signalled(new EventEmitter());
    const uninstall = lc.installSignalHandlers();
    signals.emit('SIGTERM');
    await flushMicrotasks();
    assert.deepEqual(codes, []);
    signals.emit('SIGINT');
    assert.deepEqual(codes, [1]);
    await clock.advance(1000);
    await lc.shutdown();
    await flushMicrotasks();
    assert.deepEqual(codes, [1, 0]);
    uninstall();
    assert.equal(signals.listenerCount('SIGTERM') + signals.listenerCount('SIGINT'), 0);
  });

  // A parent that spawned the process with an IPC channel (switchyard up --processes) is gone once the
  // channel closes, however it ended: SIGKILL included, which no signal of its own would report.
  it('the IPC channel closing drains then exits 0, counted as no signal; uninstall removes the listener', async () => {
    const { clock, signals, codes, lc } = signalled(Object.assign(new EventEmitter(), { channel: {} }));
    const uninstall = lc.installSignalHandlers();
    signals.emit('disconnect');
    assert.equal(lc.state, 'draining');
    signals.emit('SIGTERM');
    await flushMicrotasks();
    assert.deepEqual(codes, [], 'a signal during that drain is the first, not the second');
    await clock.advance(1000);
    await lc.shutdown();
    await flushMicrotasks();
    assert.deepEqual(codes, [0]);
    uninstall();
    assert.equal(signals.listenerCount('disconnect'), 0);
  });

  it('a process without an IPC channel does not listen for its end', () => {
    const signals = new EventEmitter();
    const lc = createLifecycle({ logger: quiet, signals: signals as never, exit: () => {} });
    lc.installSignalHandlers();
    assert.equal(signals.listenerCount('disconnect'), 0);
  });
});

describe('closeServer', () => {
  it('cuts a hung SSE stream at the deadline, not before', async () => {
    const clock = new ManualClock();
    const { server, url } = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(': open\n\n');
    });
    let started!: () => void;
    const firstByte = new Promise<void>((resolve) => (started = resolve));
    const streamEnded = new Promise<string>((resolve, reject) => {
      get(`${url}/sse`, { agent: false }, (res) => {
        res.once('data', () => started());
        res.on('close', () => resolve('closed'));
      }).on('error', reject);
    });
    await firstByte;
    let settled = false;
    const closing = closeServer(server, { timeoutMs: 1000, clock });
    void closing.then(() => (settled = true));
    await clock.advance(999);
    await new Promise((r) => setImmediate(r));
    assert.equal(settled, false, 'still waiting for the stream');
    assert.equal(server.listening, false, 'no longer accepting');
    await clock.advance(1);
    assert.deepEqual(await closing, { forced: true });
    assert.equal(await streamEnded, 'closed');
    assert.equal(closeServer(server, { timeoutMs: 1, clock }), closing, 'idempotent');
  });

  it('lets an in-flight request finish and closes its keep-alive connection without waiting for the deadline', async () => {
    const clock = new ManualClock();
    let finish!: () => void;
    const { server, url } = await serve((_req, res) => {
      finish = () => res.end('done');
    });
    const body = new Promise<string>((resolve, reject) => {
      const req = request(`${url}/slow`, { headers: { connection: 'keep-alive' } }, (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c));
        res.on('end', () => resolve(text));
      });
      req.on('error', reject);
      req.end();
    });
    while (!finish) await new Promise((r) => setImmediate(r));
    const closing = closeServer(server, { timeoutMs: 60000, clock });
    finish();
    assert.equal(await body, 'done');
    assert.deepEqual(await closing, { forced: false });
    assert.equal(clock.pendingTimers, 0, 'deadline timer cancelled');
  });

  // Node's server.close() stops the check of headersTimeout, and closeIdleConnections() does not take a
  // connection without a request for idle: such a connection held the close until the deadline (30 s on a
  // gateway at SIGTERM).
  it('closes a connection that has sent nothing, not waiting for the deadline', async () => {
    const clock = new ManualClock();
    const { server, url } = await serve((_req, res) => res.end('ok'));
    const silent = net.connect(Number(new URL(url).port), '127.0.0.1');
    dialled.push(silent);
    silent.on('error', () => {});
    silent.resume();
    const silentClosed = new Promise<void>((resolve) => silent.on('close', () => resolve()));
    await new Promise<void>((resolve) => silent.once('connect', () => resolve()));
    await connectionsHeld(server, 1);
    const closing = closeServer(server, { timeoutMs: 60000, clock });
    await within(silentClosed, 5000, 'the silent connection closed before the deadline');
    assert.deepEqual(await within(closing, 5000, 'closed before the deadline'), { forced: false });
  });

  it(
    'closes a TLS connection that has sent nothing after its handshake, not waiting for the deadline',
    { skip: 'missing' in certificate && certificate.missing },
    async () => {
      if ('missing' in certificate) return;
      const clock = new ManualClock();
      const server = createHttpsServer(certificate, (_req, res) => res.end('ok'));
      opened.push(server);
      const { port } = await listen(server, { host: '127.0.0.1', port: 0 });
      const silent = tls.connect({ port, host: '127.0.0.1', ca: certificate.cert });
      dialled.push(silent);
      silent.on('error', () => {});
      silent.resume();
      const silentClosed = new Promise<void>((resolve) => silent.on('close', () => resolve()));
      await new Promise<void>((resolve) => silent.once('secureConnect', () => resolve()));
      await connectionsHeld(server, 1);
      const closing = closeServer(server, { timeoutMs: 60000, clock });
      await within(silentClosed, 5000, 'the silent connection closed before the deadline');
      assert.deepEqual(await within(closing, 5000, 'closed before the deadline'), { forced: false });
    },
  );

  it('leaves a connection whose request has begun, and an upgraded one, to the deadline', async () => {
    const clock = new ManualClock();
    const { server, url } = await serve((_req, res) => res.end('ok'));
    const upgraded: net.Socket[] = [];
    server.on('upgrade', (_req, socket: net.Socket) => {
      upgraded.push(socket);
      socket.write('HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: test\r\n\r\n');
    });
    const port = Number(new URL(url).port);
    const partial = net.connect(port, '127.0.0.1', () => partial.write('GET / HTTP/1.1\r\nhost: x\r\n'));
    const upgrading = net.connect(port, '127.0.0.1', () =>
      upgrading.write('GET / HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\nupgrade: test\r\n\r\n'),
    );
    const ends: Array<Promise<string>> = [];
    const from = clock.now();
    for (const socket of [partial, upgrading]) {
      dialled.push(socket);
      socket.on('error', () => {});
      socket.resume();
      ends.push(new Promise((resolve) => socket.on('close', () => resolve(`closed after ${clock.now() - from} ms`))));
    }
    await connectionsHeld(server, 2);
    while (upgraded.length === 0) await new Promise((r) => setImmediate(r));
    const closing = closeServer(server, { timeoutMs: 1000, clock });
    await new Promise((r) => setTimeout(r, 150));
    assert.equal(partial.destroyed || upgrading.destroyed, false, 'neither closed before the deadline');
    await clock.advance(1000);
    assert.equal(await ends[0], 'closed after 1000 ms', 'the partial request cut at the deadline');
    // An upgraded connection is its handler's to close (closeServer's doc), even at the deadline.
    assert.equal(upgrading.destroyed, false);
    upgraded[0]?.destroy();
    await ends[1];
    assert.deepEqual(await closing, { forced: true });
  });
});

/** Resolves once `server` holds `count` connections; fails after 5 s. */
async function connectionsHeld(server: Server, count: number): Promise<void> {
  for (
    const startedAt = performance.now();
    performance.now() - startedAt < 5000;
    await new Promise((r) => setTimeout(r, 5))
  ) {
    const open = await new Promise<number>((resolve) => server.getConnections((_e, n) => resolve(n)));
    if (open === count) return;
  }
  assert.fail(`the server holds ${count} connection(s) within 5 s`);
}
