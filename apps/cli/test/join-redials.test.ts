// `runtime join` dialling again and again before it has joined: a dial that fails the same way each time
// is said at the first and every tenth, as an unreachable scheduler is, never at every redial; the tunnel's
// own lines (connected, disconnected) are said only once it has joined, when they are news. A TCP front
// stands between the command and a real scheduler replica, passing each connection through or taking the
// tunnel's upgrade and hanging up; the command runs in this process on a manual clock, whose redial timers
// the test fires one at a time, letting each dial's I/O run in between.
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { ManualClock } from '@switchyard/clock/testing';
import net from 'node:net';
import { after, afterEach, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startRuntimeNode, type RuntimeNode } from '@switchyard/runtime';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { createMetrics } from '@switchyard/service';
import { BACKOFF_DEFAULTS } from '@switchyard/tunnel';
import { acceptUpgradeAndHangUp, joinInProcess, startOneReplica, until, type JoinInProcess } from './support.ts';

const JOIN_TOKEN = 'join-token-0123456789abcdef';
const OTHER_TOKEN = 'other-join-token-0123456789';
/** Long enough that no test here reaches it: the dials, not the wait, are under test. */
const WAIT_MS = 3_600_000;
/** The first and every tenth: dials 1 and 11 are said. */
const DIALS = 12;

interface Front {
  readonly url: string;
  /** `pass`: to the replica; `hang-up`: the upgrade taken, then the connection closed. */
  mode: 'pass' | 'hang-up';
  /** Connections taken, and of those, closed. */
  readonly counts: { accepted: number; closed: number };
  /** Cuts every connection through it. */
  cut(): void;
  close(): void;
}

async function startFront(port: number): Promise<Front> {
  const sockets = new Set<net.Socket>();
  const hangingUp = createServer((_req, res) => res.writeHead(404).end());
  hangingUp.on('upgrade', acceptUpgradeAndHangUp);
  const server = net.createServer((socket) => {
    front.counts.accepted++;
    sockets.add(socket);
    socket.on('error', () => {});
    socket.once('close', () => front.counts.closed++);
    if (front.mode === 'hang-up') return void hangingUp.emit('connection', socket);
    const upstream = net.connect(port, '127.0.0.1');
    sockets.add(upstream);
    socket.pipe(upstream).pipe(socket);
    upstream.on('error', () => socket.destroy());
    upstream.once('close', () => socket.destroy());
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const front: Front = {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    mode: 'pass',
    counts: { accepted: 0, closed: 0 },
    cut: () => sockets.forEach((socket) => socket.destroy()),
    close: () => {
      front.cut();
      server.close();
    },
  };
  return front;
}

/**
 * Polls `probe` until it holds, moving `clock` on to its next timer between two polls when that is
 * due within the longest redial delay: a redial comes that way, and the dial it starts runs on real
 * sockets (its connect timeout too) while the test polls. The wait for the first join, far longer, is
 * never reached.
 */
async function untilRedialled(what: string, clock: ManualClock, probe: () => boolean): Promise<void> {
  await until(what, async () => {
    if (probe()) return true;
    const dueMs = clock.nextDueInMs;
    if (dueMs !== undefined && dueMs <= BACKOFF_DEFAULTS.maxMs) await clock.advance(dueMs);
    return false;
  });
}

/** Lets the runtime make `dials` dials through `front` that each end there, counted from now. */
async function letDial(front: Front, clock: ManualClock, dials: number): Promise<void> {
  const start = front.counts.closed;
  for (let dial = 1; dial <= dials; dial++) {
    await untilRedialled(`dial ${dial} ended at the front`, clock, () => front.counts.closed >= start + dial);
  }
}

/** `runtime join` as `rt-0` with JOIN_TOKEN through `front`, on a manual clock; `stop` ends it. */
const join = (front: Front): JoinInProcess => joinInProcess(front.url, JOIN_TOKEN, WAIT_MS);

describe('switchyard runtime join, its runtime id held at the scheduler with another join token', () => {
  let replica: SchedulerReplica;
  let holder: RuntimeNode;
  let front: Front;
  let joining: JoinInProcess;

  before(async () => {
    replica = await startOneReplica({ joinTokens: () => [JOIN_TOKEN, OTHER_TOKEN] });
    const quiet = { debug() {}, info() {}, warn() {}, error() {} };
    holder = await startRuntimeNode({
      runtimeId: 'rt-0',
      schedulerUrl: replica.url,
      joinToken: OTHER_TOKEN,
      classes: { demo: { engine: 'builtin' } },
      sandboxesMax: 1,
      sessionIdleMs: 60_000,
      logger: quiet,
      metrics: createMetrics('runtime'),
    });
    await holder.whenConnected();
    front = await startFront(Number(new URL(replica.url).port));
    joining = join(front);
  });
  after(async () => {
    await joining?.stop();
    front?.close();
    await holder?.close();
    await replica?.close();
  });

  it('says the 409 with its hint at the first refusal and every tenth, not at every redial', async () => {
    await letDial(front, joining.clock, DIALS);
    const refusals = joining.lines.filter((line) => /\(409\)$/.test(line.trimEnd()));
    assert.equal(refusals.length, 2, `dials 1 and 11 of ${DIALS}:\n${joining.lines.join('')}`);
    assert.match(
      refusals[0]!,
      /^switchyard: scheduler refused the tunnel: this runtime's id is connected to the scheduler cluster with another join token: .* \(409\)\n$/,
    );
    assert.doesNotMatch(joining.lines.join(''), / joined |gave up/);
  });
});

describe('switchyard runtime join, its tunnel taken and dropped before a scheduler used it', () => {
  let front: Front;
  let joining: JoinInProcess;

  beforeEach(async () => {
    front = await startFront(1);
    front.mode = 'hang-up';
    joining = join(front);
  });
  afterEach(async () => {
    await joining.stop();
    front.close();
  });

  it('says no tunnel came up or went, but the drop as a failed dial, at the first and every tenth', async () => {
    await letDial(front, joining.clock, DIALS);
    const text = joining.lines.join('');
    assert.doesNotMatch(text, /tunnel connected|tunnel disconnected/, 'no tunnel line before the join');
    const drops = joining.lines.filter((line) => /took the tunnel/.test(line));
    assert.equal(drops.length, 2, `dials 1 and 11 of ${DIALS}:\n${text}`);
    for (const line of drops) {
      assert.match(
        line,
        /^switchyard: http:\/\/127\.0\.0\.1:\d+ took the tunnel and dropped it before a scheduler used it \(.+\); dialling again for up to \d+ s \(--wait-seconds\)\n$/,
      );
    }
    assert.doesNotMatch(text, / joined |gave up/);
  });
});

describe('switchyard runtime join, its tunnel going and coming back', () => {
  let replica: SchedulerReplica;
  let front: Front;
  let joining: JoinInProcess;

  before(async () => {
    replica = await startOneReplica({ joinTokens: () => [JOIN_TOKEN] });
    front = await startFront(Number(new URL(replica.url).port));
    joining = join(front);
  });
  after(async () => {
    await joining?.stop();
    front?.close();
    await replica?.close();
  });

  it('says nothing of the tunnel before the join, then its going and coming back, naming the URL each time', async () => {
    const { lines, clock } = joining;
    const joined = await until('the joined line', () => lines.findIndex((line) => / joined /.test(line)) + 1);
    assert.doesNotMatch(lines.slice(0, joined).join(''), /tunnel connected/, 'the join says it');
    front.cut();
    await until('the tunnel said gone', () => lines.slice(joined).some((line) => /tunnel disconnected/.test(line)));
    const gone = lines.slice(joined).find((line) => /tunnel disconnected/.test(line));
    assert.match(
      gone!,
      new RegExp(`^switchyard: tunnel disconnected from ${front.url.replaceAll('.', '\\.')} \\(.+\\)\n$`),
    );
    await untilRedialled('the tunnel said back', clock, () =>
      lines.slice(joined).some((line) => /tunnel connected/.test(line)),
    );
    const back = lines.slice(joined).find((line) => /tunnel connected/.test(line));
    assert.equal(back, `switchyard: tunnel connected to ${front.url}\n`);
  });
});
