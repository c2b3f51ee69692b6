// How long a replica holds a connection that never finishes what it must
// send first: its request's headers (trickled to the runtimes' connect path,
// a byte at a time) or, over TLS, its handshake (nothing sent at all). Each
// is closed at its 10 s deadline, not at Node's next check of it (every 30 s
// by default) nor at Node's TLS handshake default (120 s). Raw sockets on
// loopback against real replicas, plain and TLS.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { MemoryLeaseStore } from '@switchyard/election';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { certificateFor127 } from '@switchyard/service/testing';
import { startReplicas } from './support.ts';

/** The replica's deadline for headers, and for a TLS handshake. */
const DEADLINE_MS = 10_000;
/** Leeway for a loaded machine; Node's default check interval alone would add up to 30 s. */
const SLACK_MS = 2_500;

interface Held {
  /** From connect to the replica's close. */
  readonly heldMs: number;
  readonly answer: string;
}

/** Connects, runs `feed` on the socket, and resolves once the replica closes it, or rejects past `limitMs`. */
function holdOpen(port: number, feed: (socket: net.Socket) => () => void, limitMs: number): Promise<Held> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const started = performance.now();
    let answer = '';
    let stop = (): void => {};
    socket.on('connect', () => (stop = feed(socket)));
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
    socket.on('error', () => {});
    const timer = setTimeout(() => {
      stop();
      socket.destroy();
      reject(new Error(`still open after ${limitMs} ms`));
    }, limitMs);
    socket.once('close', () => {
      clearTimeout(timer);
      stop();
      resolve({ heldMs: performance.now() - started, answer });
    });
  });
}

/** Writes a connect request's header block a byte every 500 ms, never its end. */
const trickleHeaders = (socket: net.Socket): (() => void) => {
  const text = `GET /api/runtime/connect HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Pad: ${'a'.repeat(100)}`;
  let sent = 0;
  const timer = setInterval(() => {
    if (sent < text.length && !socket.destroyed) socket.write(text[sent++]!);
  }, 500);
  return () => clearInterval(timer);
};

describe('a replica and clients that never finish their start', () => {
  const certificate = certificateFor127();
  let plain: SchedulerReplica;
  let secure: SchedulerReplica | undefined;

  before(async () => {
    [plain] = (await startReplicas(1)) as [SchedulerReplica];
    if ('missing' in certificate) return;
    [secure] = await startReplicas(1, new MemoryLeaseStore(), undefined, {
      tls: certificate,
      advertiseUrl: 'https://127.0.0.1:{port}',
    });
  });
  after(async () => {
    await Promise.all([plain.close(), secure?.close()]);
  });

  it('closes one trickling its headers at 10 s with 408, and over TLS one that never starts its handshake', async (t) => {
    const limitMs = DEADLINE_MS + SLACK_MS;
    const [headers, handshake] = await Promise.all([
      holdOpen(plain.port, trickleHeaders, limitMs),
      secure ? holdOpen(secure.port, () => () => {}, limitMs) : undefined,
    ]);
    assert.match(headers.answer, /^HTTP\/1\.1 408 /);
    assert.ok(headers.heldMs >= DEADLINE_MS - 100, `closed after ${headers.heldMs} ms, before the deadline`);
    if (!handshake) return t.skip('missing' in certificate ? certificate.missing : 'no TLS replica');
    assert.ok(handshake.heldMs >= DEADLINE_MS - 100, `closed after ${handshake.heldMs} ms, before the deadline`);
  });
});
