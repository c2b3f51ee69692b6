// The state machine of UpstreamChecks on a manual clock: real loopback
// sockets stand for the connections it watches; the check it makes is
// answered, refused or left hanging by the test.
import net from 'node:net';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock, flushMicrotasks } from '@switchyard/clock/testing';
import { UPSTREAM_SILENT, UpstreamChecks } from '../src/upstream-checks.ts';

const INTERVAL_MS = 1000;
const ORIGIN = 'http://10.0.0.1:7070';
const quiet = (): void => {};

describe('upstream checks', () => {
  const server = net.createServer((socket) => socket.on('error', quiet));
  let port = 0;
  before(async () => {
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as net.AddressInfo).port;
  });
  after(() => server.close());

  /** A connected loopback socket, and the error it was destroyed with, if any. */
  async function connection(): Promise<{ socket: net.Socket; error: () => Error | undefined }> {
    const socket = net.connect(port, '127.0.0.1');
    let error: Error | undefined;
    socket.on('error', (e) => (error = e));
    closings.set(socket, new Promise((resolve) => socket.once('close', () => resolve())));
    await once(socket, 'connect');
    return { socket, error: () => error };
  }

  /** Resolves once `socket` has closed, whatever it was destroyed with (`once` would reject on its error). */
  const closings = new WeakMap<net.Socket, Promise<void>>();
  const closed = (socket: net.Socket): Promise<void> => closings.get(socket)!;

  function setup() {
    const clock = new ManualClock();
    const checks: Array<{ origin: string; answer(): void; fail(): void }> = [];
    const warnings: string[] = [];
    const log = (_o: object, msg?: string): void => void warnings.push(msg ?? '');
    const upstreams = new UpstreamChecks({
      intervalMs: INTERVAL_MS,
      clock,
      check: (origin) =>
        new Promise((resolve, reject) => checks.push({ origin, answer: () => resolve(undefined), fail: reject })),
      logger: { info: log, warn: log, error: log, debug: quiet },
    });
    return { clock, checks, warnings, upstreams };
  }

  /** An upstream made silent by its first check failing, and the connection that was open to it. */
  async function silencedByAFailedCheck() {
    const setUp = setup();
    const { socket } = await connection();
    setUp.upstreams.track(ORIGIN, socket);
    await setUp.clock.advance(INTERVAL_MS);
    setUp.checks.shift()!.fail();
    await flushMicrotasks();
    return { ...setUp, socket };
  }

  it('checks an upstream while connections to it are open, and not after', async () => {
    const { clock, checks, upstreams } = setup();
    const { socket } = await connection();
    upstreams.track(ORIGIN, socket);
    await clock.advance(INTERVAL_MS);
    assert.deepEqual(
      checks.map((c) => c.origin),
      [ORIGIN],
    );
    checks[0]!.answer();
    await flushMicrotasks();
    socket.destroy();
    await closed(socket);
    await clock.advance(INTERVAL_MS);
    assert.equal(checks.length, 1, 'no connection left: not checked again');
    assert.equal(clock.pendingTimers, 0, 'and no timer left running');
    upstreams.close();
  });

  it('makes an upstream silent when a check goes unanswered for an interval: its connections end with UPSTREAM_SILENT', async () => {
    const { clock, checks, warnings, upstreams } = setup();
    const first = await connection();
    const second = await connection();
    upstreams.track(ORIGIN, first.socket);
    upstreams.track(ORIGIN, second.socket);
    await clock.advance(INTERVAL_MS);
    assert.equal(upstreams.silent(ORIGIN), false);
    await clock.advance(INTERVAL_MS);
    assert.equal(upstreams.silent(ORIGIN), true);
    await Promise.all([closed(first.socket), closed(second.socket)]);
    assert.equal((first.error() as { code?: string }).code, UPSTREAM_SILENT);
    assert.equal((second.error() as { code?: string }).code, UPSTREAM_SILENT);
    assert.deepEqual(warnings, ['upstream stopped answering; closed its connections']);

    // Still checked with no connection left, and in good standing again once a check is answered.
    checks[0]!.fail();
    await flushMicrotasks();
    await clock.advance(INTERVAL_MS);
    assert.equal(checks.length, 2);
    checks[1]!.answer();
    await flushMicrotasks();
    assert.equal(upstreams.silent(ORIGIN), false);
    assert.equal(warnings.at(-1), 'upstream answers again; it is dialled again');
    upstreams.close();
  });

  it('makes an upstream silent at once when a check fails (it refuses connections)', async () => {
    const { upstreams, socket } = await silencedByAFailedCheck();
    assert.equal(upstreams.silent(ORIGIN), true);
    await closed(socket);
    upstreams.close();
  });

  it('forgets a silent upstream nobody dials after a minute of failed checks', async () => {
    const { clock, checks, upstreams, socket } = await silencedByAFailedCheck();
    await closed(socket);
    for (let t = 0; t < 59_000; t += INTERVAL_MS) {
      await clock.advance(INTERVAL_MS);
      for (const c of checks.splice(0)) c.fail();
      await flushMicrotasks();
    }
    assert.equal(upstreams.silent(ORIGIN), true, 'remembered for a minute');
    await clock.advance(2 * INTERVAL_MS);
    assert.equal(upstreams.silent(ORIGIN), false, 'then forgotten: the next dial finds out afresh');
    assert.equal(clock.pendingTimers, 0);
    upstreams.close();
  });

  it('says nothing of an upstream whose check the closing gateway cut short', async () => {
    const { clock, checks, warnings, upstreams } = setup();
    const { socket } = await connection();
    upstreams.track(ORIGIN, socket);
    await clock.advance(INTERVAL_MS);
    upstreams.close();
    checks[0]!.fail();
    await flushMicrotasks();
    assert.deepEqual(warnings, []);
    assert.equal(socket.destroyed, false, 'its connections are closed by their owner, not as silent');
    socket.destroy();
  });

  it('refuses a dial to a silent upstream without dialling, with a connect failure', async () => {
    const { upstreams } = await silencedByAFailedCheck();
    let dialled = 0;
    const connector = upstreams.watching((_options, callback) => {
      dialled++;
      callback(new Error('should not dial'), null);
    });
    const target = { protocol: 'http:', hostname: '10.0.0.1', host: '10.0.0.1:7070', port: '7070' };
    const refused = await new Promise<Error | null>((resolve) => {
      connector(target, (...args: [Error, null] | [null, unknown]) => resolve(args[0]));
    });
    assert.equal(dialled, 0);
    assert.equal((refused as { code?: string }).code, 'SWITCHYARD_UPSTREAM_SILENT_NOT_DIALLED');
    upstreams.close();
  });
});
