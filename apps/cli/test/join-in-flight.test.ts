// `runtime join` whose --wait-seconds run out while a dial is in flight: it
// waits for that dial rather than giving up on an earlier one's failure. A
// TCP front, which the test tells to drop or to hold connections, stands
// between the command and a real scheduler replica; the command runs in
// this process on a manual clock, so no test waits out real seconds.
import { once } from 'node:events';
import net from 'node:net';
import { after, afterEach, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { joinInProcess, startOneReplica, until, type JoinInProcess } from './support.ts';

const JOIN_TOKEN = 'join-token-0123456789abcdef';
const WAIT_MS = 1000;
/** Past the first redial: backoff starts at 250 ms, less jitter. */
const FIRST_REDIAL_MS = 300;

/** A TCP front to `port` that drops each connection or holds it unread until told to pass or drop it. */
async function startFront(port: number): Promise<{
  url: string;
  mode: 'drop' | 'hold';
  readonly held: net.Socket[];
  pass(): void;
  dropHeld(): void;
  close(): void;
}> {
  const sockets = new Set<net.Socket>();
  const held: net.Socket[] = [];
  const front = {
    url: '',
    mode: 'drop' as 'drop' | 'hold',
    held,
    pass() {
      for (const socket of held.splice(0)) {
        const upstream = net.connect(port, '127.0.0.1');
        sockets.add(upstream);
        socket.pipe(upstream).pipe(socket);
        upstream.on('error', () => socket.destroy());
        socket.on('error', () => upstream.destroy());
      }
    },
    dropHeld() {
      for (const socket of held.splice(0)) socket.destroy();
    },
    close() {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    if (front.mode === 'drop') return void socket.destroy();
    socket.pause();
    held.push(socket);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  front.url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  return front;
}

describe('switchyard runtime join, --wait-seconds run out with a dial in flight', () => {
  let replica: SchedulerReplica;
  let front: Awaited<ReturnType<typeof startFront>>;
  let joining: JoinInProcess;

  before(async () => {
    replica = await startOneReplica({ joinTokens: () => [JOIN_TOKEN] });
  });
  after(() => replica?.close());

  beforeEach(async () => {
    front = await startFront(Number(new URL(replica.url).port));
    joining = joinInProcess(front.url, JOIN_TOKEN, WAIT_MS);
    const { clock, lines } = joining;
    // The first dial fails; the redial after it is held, in flight, when the wait runs out.
    await until('the first failed dial said', () => lines.some((line) => /cannot reach/.test(line)));
    front.mode = 'hold';
    await clock.advance(FIRST_REDIAL_MS);
    await until('the redial held at the front', () => front.held.length > 0);
    await clock.advance(WAIT_MS);
  });
  afterEach(async () => {
    const stopped = joining.stop();
    front.dropHeld();
    await stopped;
    front.close();
  });

  it('does not give up, and joins once that dial goes through', async () => {
    const { clock, lines } = joining;
    assert.equal(joining.code, undefined, `not ended while a dial is in flight:\n${lines.join('')}`);
    front.pass();
    await until('the joined line', () => lines.some((line) => /^switchyard: runtime rt-0 joined /.test(line)));
    await clock.advance(WAIT_MS);
    assert.equal(joining.code, undefined, lines.join(''));
    assert.doesNotMatch(lines.join(''), /gave up/);
  });

  it('gives up once that dial fails, naming its failure', async () => {
    const { lines } = joining;
    assert.equal(joining.code, undefined, `not ended while a dial is in flight:\n${lines.join('')}`);
    front.mode = 'drop';
    front.dropHeld();
    assert.equal(await joining.run, 1, lines.join(''));
    assert.match(
      lines.at(-1)!,
      /^switchyard: gave up dialling http:\/\/127\.0\.0\.1:\d+ after 1 s: .*; check <scheduler-url>, or wait longer with --wait-seconds\n$/,
    );
  });
});
