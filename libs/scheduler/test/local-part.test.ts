// How long a replica holds requests for a runtime whose tunnel it lost, and
// when it lets a runtime go that an epoch shows behind another replica, on a
// manual clock. The tunnels are stand-ins with the fields LocalPart reads;
// redial.test.ts shows the same over real connections.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { RuntimeStateStore, createWatchHandler } from '@switchyard/agent';
import { ManualClock, within } from '@switchyard/clock/testing';
import { WATCH_LIMITS, parseWith, runtimeStateSchema } from '@switchyard/protocol';
import type { Runtime, RuntimeInfo } from '@switchyard/protocol';
import type { Tunnel } from '@switchyard/tunnel';
import { REDIAL_WAIT_MS, parseScheduleRequest } from '@switchyard/scheduler';
import { ClusterIndex, schedule } from '@switchyard/scheduling';
import { LocalPart, type LocalPartOptions } from '../src/local-part.ts';
import type { RedialOutcome } from '../src/redial-waits.ts';
import { quietLogger } from './support.ts';

interface StandIn {
  readonly tunnel: Tunnel;
  /** Reasons it was closed with. */
  readonly closedFor: string[];
  /** Ends it as its endpoint would report a lost connection. */
  lose(peerNoticesBy?: number): void;
}

function standIn(
  runtimeId: string,
  generation: number,
  peerQuiet = true,
  minRttMs?: number,
  // By default the part's /watch of it never gets an answer.
  watch: { metadata?: RuntimeInfo['metadata']; fetch?: typeof fetch } = {},
): StandIn {
  const closedFor: string[] = [];
  const fields = {
    runtimeId,
    info: { id: runtimeId, classes: ['demo'], metadata: watch.metadata ?? {}, version: '1.0.0', limits: {} },
    generation,
    closed: false,
    lost: false,
    peerNoticesBy: undefined as number | undefined,
    peerQuiet,
    quiet: false,
    minRttMs,
    fetch: watch.fetch ?? (() => new Promise<Response>(() => {})),
    close(reason: string) {
      fields.closed = true;
      closedFor.push(reason);
    },
  };
  return {
    tunnel: fields as unknown as Tunnel,
    closedFor,
    lose(peerNoticesBy) {
      Object.assign(fields, { closed: true, lost: true, peerNoticesBy });
    },
  };
}

/** A part of replica s0: on a manual clock, logging nothing, told of no change, unless `options` say otherwise. */
function newPart(options: Partial<LocalPartOptions> = {}): LocalPart {
  return new LocalPart({
    replicaId: 's0',
    replicaUrl: 'http://s0',
    clock: new ManualClock(1_000_000),
    logger: quietLogger,
    onChange: () => {},
    ...options,
  });
}

/** A logger whose every level goes to `line(level)`. */
const byLevel = <T>(line: (level: string) => T) => ({
  debug: line('debug'),
  info: line('info'),
  warn: line('warn'),
  error: line('error'),
});

function setup() {
  const clock = new ManualClock(1_000_000);
  const outcomes: RedialOutcome[] = [];
  let superseded = 0;
  const part = newPart({
    clock,
    onRedialWaitEnded: (outcome) => outcomes.push(outcome),
    onSuperseded: () => superseded++,
  });
  return { clock, part, outcomes, superseded: () => superseded };
}

/** `store`'s state stream on a loopback port, as a runtime serves it: `base` is its origin. */
async function serveWatch(store: RuntimeStateStore): Promise<{ base: string; close(): void }> {
  const watch = createWatchHandler(store);
  const server = createServer(watch);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close() {
      watch.close();
      server.closeAllConnections();
      server.close();
    },
  };
}

/** Calls back through `afterRedial` and reports whether it has run yet. */
function waiter(part: LocalPart, runtimeId: string): () => boolean {
  let ran = false;
  part.afterRedial(runtimeId, () => (ran = true));
  return () => ran;
}

const elsewhere = (generation: number) => (id: string) => ({ id, owner: 's1', generation }) as unknown as Runtime;

describe("a replica's part, when a tunnel is lost", () => {
  it('holds requests REDIAL_WAIT_MS after a connection that broke', async () => {
    const { clock, part, outcomes } = setup();
    const r0 = standIn('r0', 1);
    part.attach(r0.tunnel);
    r0.lose();
    part.detach(r0.tunnel, 'connection closed');
    const ran = waiter(part, 'r0');
    await clock.advance(REDIAL_WAIT_MS - 1);
    assert.equal(ran(), false);
    await clock.advance(1);
    assert.equal(ran(), true);
    assert.deepEqual(outcomes, ['gone']);
    part.close();
  });

  it('lets them go on at once when the runtime is back', () => {
    const { part, outcomes } = setup();
    const r0 = standIn('r0', 1);
    part.attach(r0.tunnel);
    r0.lose();
    part.detach(r0.tunnel, 'connection closed');
    const ran = waiter(part, 'r0');
    const again = standIn('r0', 2);
    part.attach(again.tunnel);
    assert.equal(ran(), true);
    assert.equal(part.tunnel('r0'), again.tunnel);
    assert.deepEqual(outcomes, ['back']);
    part.close();
    assert.deepEqual(outcomes, ['back'], 'closing the part ends no wait to count');
  });

  it('holds them longer after a connection over a slow link: the redial takes round trips', async () => {
    for (const { rttMs, waitMs } of [
      { rttMs: 50, waitMs: REDIAL_WAIT_MS },
      // The runtime's first backoff delay (250 ms) and four round trips.
      { rttMs: 200, waitMs: 250 + 4 * 200 },
      { rttMs: 5000, waitMs: 250 + 4 * 1000 },
    ]) {
      const { clock, part } = setup();
      const r0 = standIn('r0', 1, true, rttMs);
      part.attach(r0.tunnel);
      r0.lose();
      part.detach(r0.tunnel, 'connection closed');
      const ran = waiter(part, 'r0');
      await clock.advance(waitMs - 1);
      assert.equal(ran(), false, `rtt ${rttMs} ms: still waiting`);
      await clock.advance(1);
      assert.equal(ran(), true, `rtt ${rttMs} ms: done after ${waitMs} ms`);
      part.close();
    }
  });

  it('holds them REDIAL_WAIT_MS past the time a silent runtime has noticed too', async () => {
    const { clock, part } = setup();
    const r0 = standIn('r0', 1);
    part.attach(r0.tunnel);
    r0.lose(clock.monotonicNow() + 1500);
    part.detach(r0.tunnel, 'no ping answer within 300 ms');
    const ran = waiter(part, 'r0');
    await clock.advance(1500 + REDIAL_WAIT_MS - 1);
    assert.equal(ran(), false);
    await clock.advance(1);
    assert.equal(ran(), true);
    part.close();
  });

  it('holds them as long whichever way the wall clock stepped since the silent runtime last pinged', async () => {
    for (const stepMs of [-3_600_000, 3_600_000]) {
      const { clock, part } = setup();
      const r0 = standIn('r0', 1);
      part.attach(r0.tunnel);
      r0.lose(clock.monotonicNow() + 1500);
      clock.stepWall(stepMs);
      part.detach(r0.tunnel, 'no ping answer within 300 ms');
      const ran = waiter(part, 'r0');
      await clock.advance(1500 + REDIAL_WAIT_MS - 1);
      assert.equal(ran(), false, `step ${stepMs} ms: still waiting`);
      await clock.advance(1);
      assert.equal(ran(), true, `step ${stepMs} ms: done`);
      part.close();
    }
  });

  it('lets them go on at once when an epoch shows the runtime behind another replica', async () => {
    const { clock, part, outcomes } = setup();
    const r0 = standIn('r0', 1);
    part.attach(r0.tunnel);
    r0.lose(clock.monotonicNow() + 5000);
    part.detach(r0.tunnel, 'no ping answer within 300 ms');
    const ran = waiter(part, 'r0');
    part.reconcile(() => undefined);
    part.reconcile((id) => ({ id, owner: 's0', generation: 1 }) as unknown as Runtime);
    part.reconcile(elsewhere(1));
    assert.equal(
      ran(),
      false,
      'not while the epoch shows it nowhere, still here, or on a connection older than the lost one',
    );
    part.reconcile(elsewhere(2));
    assert.equal(ran(), true);
    assert.deepEqual(outcomes, ['moved']);
    part.close();
  });
});

describe("a replica's part, when an epoch shows one of its runtimes behind another replica", () => {
  it('closes the tunnel it holds for it if the other is newer and its runtime stopped pinging here', () => {
    const { part, superseded } = setup();
    const r0 = standIn('r0', 5);
    part.attach(r0.tunnel);
    part.reconcile(elsewhere(4));
    part.reconcile(elsewhere(5));
    assert.deepEqual(r0.closedFor, [], 'an older or equal generation elsewhere is not the runtime leaving');
    part.reconcile(elsewhere(6));
    assert.deepEqual(r0.closedFor, ['superseded by a newer connection to s1']);
    assert.equal(part.tunnel('r0'), undefined);
    assert.equal(superseded(), 1);
    part.close();
  });

  it('counts a superseded tunnel once when a second epoch comes before its close is reported', () => {
    // Two commits read from one socket chunk are applied in one tick; the endpoint reports the close a microtask later.
    const { part, superseded } = setup();
    const r0 = standIn('r0', 5);
    part.attach(r0.tunnel);
    part.reconcile(elsewhere(6));
    part.reconcile(elsewhere(7));
    assert.deepEqual(r0.closedFor, ['superseded by a newer connection to s1']);
    assert.equal(superseded(), 1);
    part.close();
  });

  it('keeps a tunnel whose runtime still pings (another runtime with its id, or replica clocks apart)', () => {
    const { part } = setup();
    const r0 = standIn('r0', 5, false);
    part.attach(r0.tunnel);
    part.reconcile(elsewhere(6));
    assert.deepEqual(r0.closedFor, []);
    assert.equal(part.tunnel('r0'), r0.tunnel);
    part.close();
  });
});

describe("a replica's part in wire form", () => {
  const labels = (prefix: string, count: number): Record<string, string> =>
    Object.fromEntries(Array.from({ length: count }, (_, i) => [`${prefix}${i}`, 'x']));

  it('reports the metadata its runtime streams, not that merged with the metadata it dialled with', async () => {
    // A sidecar runtime relabelled itself after it dialled: 40 labels then, 40 others now. Merged,
    // the 80 pass the 64 every replica allows, and the leader refuses the collect carrying them.
    const store = new RuntimeStateStore({ seqStart: 0 });
    store.setMetadata(labels('now-', 40));
    const served = await serveWatch(store);
    let synced!: () => void;
    const wasSynced = new Promise<void>((resolve) => (synced = resolve));
    const part = newPart({
      onChange: () => {
        if (part.states()[0]?.runtime.available) synced();
      },
    });
    try {
      const r0 = standIn('r0', 1, true, undefined, {
        metadata: labels('dialled-', 40),
        fetch: (_url, init) => fetch(`${served.base}/watch`, init),
      });
      part.attach(r0.tunnel);
      await wasSynced;
      const [state] = part.states();
      const checked = parseWith(runtimeStateSchema, state);
      assert.ok(checked.ok, checked.ok ? '' : checked.error);
      assert.deepEqual(state!.runtime.metadata, store.snapshot().metadata);
    } finally {
      part.close();
      served.close();
      store.close();
    }
  });
});

describe("a replica's part, published with its tunnels' join tokens", () => {
  it('carries with each runtime the fingerprint of the token its tunnel came with, for other replicas to check', () => {
    const part = newPart();
    try {
      const r0 = standIn('r0', 1);
      Object.assign(r0.tunnel, { tokenFingerprint: 'AAAAAAAAAAAAAAAA' });
      part.attach(r0.tunnel);
      part.attach(standIn('r1', 2).tunnel);
      const [first, second] = part.states();
      assert.equal(first!.runtime.tokenFingerprint, 'AAAAAAAAAAAAAAAA');
      assert.ok(!('tokenFingerprint' in second!.runtime), 'none for a tunnel opened without one');
      const checked = parseWith(runtimeStateSchema, first);
      assert.ok(checked.ok, checked.ok ? '' : checked.error);
    } finally {
      part.close();
    }
  });
});

describe("a replica's part, published with its tunnels' runtime instances", () => {
  it('carries with each runtime the instance its process dialled with, for other replicas to check', () => {
    const part = new LocalPart({
      replicaId: 's0',
      replicaUrl: 'http://s0',
      clock: new ManualClock(1_000_000),
      logger: quietLogger,
      onChange: () => {},
    });
    try {
      const r0 = standIn('r0', 1);
      Object.assign(r0.tunnel, { instance: 'instance-0123456789ab' });
      part.attach(r0.tunnel);
      part.attach(standIn('r1', 2).tunnel);
      const [first, second] = part.states();
      assert.equal(first!.runtime.instance, 'instance-0123456789ab');
      assert.ok(!('instance' in second!.runtime), 'none for a runtime that named none');
      const checked = parseWith(runtimeStateSchema, first);
      assert.ok(checked.ok, checked.ok ? '' : checked.error);
    } finally {
      part.close();
    }
  });
});

describe("a replica's part, when its runtime's first snapshot is refused", () => {
  it('keeps the runtime unschedulable with its dialled limits, not available with an empty state', async () => {
    // A snapshot whose threads name more processes than a runtime may report: the mirror refuses it, and
    // the watcher asks for another. Until one is taken the runtime's state is unknown here.
    const store = new RuntimeStateStore({ seqStart: 0 });
    for (const process of ['a', 'b', 'c']) store.addThread(process, 't');
    const served = await serveWatch(store);
    let refused!: () => void;
    const wasRefused = new Promise<void>((resolve) => (refused = resolve));
    const logger = {
      ...quietLogger,
      error: (fields: object, msg?: string) => {
        // The mirror's refusal, thrown from the snapshot callback, is logged as a state over the limits.
        if (
          msg?.startsWith('runtime state over the limits') &&
          /at most 2 processes/.test(String((fields as { err?: unknown }).err))
        )
          refused();
      },
    };
    const part = newPart({ logger, mirror: { processesMax: 2 } });
    try {
      const r0 = standIn('r0', 1, true, undefined, { fetch: (_url, init) => fetch(`${served.base}/watch`, init) });
      part.attach(r0.tunnel);
      await wasRefused;
      const [state] = part.states();
      assert.equal(state!.runtime.available, false, 'not schedulable');
      assert.deepEqual(state!.runtime.idleWeight, r0.tunnel.info.limits, 'the limits it dialled with');
      assert.deepEqual(state!.processes, []);
    } finally {
      part.close();
      served.close();
      store.close();
    }
  });
});

describe("a replica's part, when its runtime's state grows past the limits after it synced", () => {
  it('places no new sandbox there until a snapshot within them comes, naming the options to raise', async () => {
    const clock = new ManualClock(1_000_000);
    const store = new RuntimeStateStore({ seqStart: 0 });
    store.addThread('a', 't1');
    store.addProcess('b');
    const served = await serveWatch(store);
    const errors: string[] = [];
    let logged!: () => void;
    const wasLogged = new Promise<void>((resolve) => (logged = resolve));
    const error = (fields: object, msg?: string): void => {
      errors.push(`${msg} ${JSON.stringify(fields)}`);
      logged();
    };
    let changed: () => void = () => {};
    const part = newPart({
      clock,
      logger: { ...quietLogger, error },
      onChange: () => changed(),
      mirror: { processesMax: 2, threadsMax: 10 },
    });
    // Where the part's runtimes place a request, as every replica's pipeline would from an epoch of them.
    const placed = (request: object): string | undefined => {
      const parsed = parseScheduleRequest({ class: 'demo', ...request });
      assert.ok(parsed.ok);
      const decision = schedule(ClusterIndex.from(part.states()), parsed.value);
      return decision.ok ? decision.runtime : undefined;
    };
    const takesNew = (): boolean => placed({ processId: 'new' }) === 'r0';
    // Resolves once the part, at one of its changes, places a new sandbox on the runtime as `wanted`.
    const takesNewBecomes = (wanted: boolean): Promise<void> =>
      within(
        new Promise<void>((resolve) => {
          changed = () => void (takesNew() === wanted && resolve());
          changed();
        }),
        10_000,
        `runtime never ${wanted ? 'takes' : 'refuses'} a new sandbox`,
      );
    try {
      const r0 = standIn('r0', 1, true, undefined, { fetch: (_url, init) => fetch(`${served.base}/watch`, init) });
      part.attach(r0.tunnel);
      await takesNewBecomes(true);

      store.addProcess('c');
      await within(wasLogged, 10_000, 'no error logged');
      assert.equal(takesNew(), false, 'a new sandbox still goes there');
      assert.equal(errors.length, 1, errors.join('\n'));
      assert.match(
        errors[0]!,
        /^runtime state over the limits: .*raise runtimeState\.processesMax or runtimeState\.threadsMax/,
      );
      assert.match(errors[0]!, /"runtime":"r0".*"processesMax":2,"threadsMax":10/);
      // The runtime serves on: what it holds goes on there (a 404 would end a live session), and it stays live,
      // so its id stays claimed by its join token at every other replica.
      assert.equal(placed({ processId: 'a', threadId: 't1' }), 'r0', 'its session is sent elsewhere');
      assert.equal(placed({ processId: 'b' }), 'r0', 'its sandbox is sent elsewhere');
      assert.equal(part.states()[0]!.runtime.available, true, 'taken for a runtime gone');

      // Back within the limits, it takes new sandboxes again once the replica asks again (30 s later).
      store.removeProcess('c');
      await clock.advance(30_000);
      await takesNewBecomes(true);
      assert.deepEqual(part.states()[0]!.processes, ['a', 'b']);
    } finally {
      part.close();
      served.close();
      store.close();
    }
  });
});

describe("a replica's part, while its runtime stays past the limits", () => {
  it('says so once when it goes over and once when it is back, however often it asks meanwhile, and counts it', async () => {
    const clock = new ManualClock(1_000_000);
    const store = new RuntimeStateStore({ seqStart: 0 });
    store.addProcess('a');
    store.addProcess('b');
    const served = await serveWatch(store);
    const lines: { level: string; msg: string }[] = [];
    let logged: () => void = () => {};
    const line = (level: string) => (fields: object, msg?: string) => {
      // Every line about this runtime's state past the limits names the refusal.
      if (!/at most 2 processes/.test(String((fields as { err?: unknown }).err)) && !msg?.includes('limits')) return;
      lines.push({ level, msg: msg ?? '' });
      logged();
    };
    /** Resolves once `count` lines were logged about the limits. */
    const linesReach = (count: number): Promise<void> =>
      within(
        new Promise<void>((resolve) => {
          logged = () => void (lines.length >= count && resolve());
          logged();
        }),
        10_000,
        `only ${lines.length} of ${count} lines about the limits`,
      );
    const part = newPart({ clock, logger: byLevel(line), mirror: { processesMax: 2 } });
    const loud = (): string[] => lines.filter((l) => l.level !== 'debug').map((l) => `${l.level} ${l.msg}`);
    try {
      const r0 = standIn('r0', 1, true, undefined, { fetch: (_url, init) => fetch(`${served.base}/watch`, init) });
      part.attach(r0.tunnel);
      assert.equal(part.runtimesOverStateLimit, 0);
      store.addProcess('c');
      await linesReach(1);
      assert.equal(part.runtimesOverStateLimit, 1, 'counted while over');
      // The replica asks again every 30 s, and is refused each time, for as long as the runtime stays over.
      for (let asked = 1; asked <= 3; asked++) {
        await clock.advance(30_000);
        await linesReach(1 + asked);
      }
      assert.equal(part.runtimesOverStateLimit, 1, 'still counted');
      assert.equal(loud().length, 1, loud().join('\n'));
      assert.match(loud()[0]!, /^error runtime state over the limits: /);

      store.removeProcess('c');
      await clock.advance(30_000);
      await linesReach(5);
      assert.equal(part.runtimesOverStateLimit, 0, 'no longer counted once back within them');
      assert.equal(loud().length, 2, loud().join('\n'));
      assert.match(loud()[1]!, /^info runtime state back within the limits/);
    } finally {
      part.close();
      served.close();
      store.close();
    }
  });
});

describe("a replica's part, when its runtime's snapshot in parts passes the limits", () => {
  it('logs an error naming the limit, takes none of it and keeps the runtime unschedulable', async () => {
    // 25,000 threads, sent in three parts, to a replica that takes 15,000 of a runtime.
    const store = new RuntimeStateStore({ seqStart: 0 });
    for (let i = 0; i < 25_000; i++) store.addThread(`p-${i % 100}`, `t-${i}`);
    const served = await serveWatch(store);
    const errors: string[] = [];
    let logged!: () => void;
    const wasLogged = new Promise<void>((resolve) => (logged = resolve));
    const error = (fields: object, msg?: string): void => {
      errors.push(`${msg} ${JSON.stringify(fields)}`);
      logged();
    };
    const part = newPart({ logger: { ...quietLogger, error }, mirror: { threadsMax: 15_000 } });
    try {
      const r0 = standIn('r0', 1, true, undefined, { fetch: (_url, init) => fetch(`${served.base}/watch`, init) });
      part.attach(r0.tunnel);
      await within(wasLogged, 20_000, 'no error logged');
      assert.equal(errors.length, 1, errors.join('\n'));
      assert.match(errors[0]!, /^runtime state over the limits: /);
      assert.match(errors[0]!, /"runtime":"r0","err":"snapshot in parts: more than 15000 threads"/);
      const [state] = part.states();
      assert.equal(state!.runtime.available, false, 'not schedulable');
      assert.deepEqual(state!.threads, []);
    } finally {
      part.close();
      served.close();
      store.close();
    }
  });
});

describe("a replica's part, when its runtime's snapshot is bigger than one /watch event", () => {
  it('takes it in parts and makes the runtime schedulable with its whole state', async () => {
    // 130,000 threads named by 128-character ids: about 36 M characters, more than eventCharsMax.
    const store = new RuntimeStateStore({ seqStart: 0 });
    const id = (prefix: string, i: number): string => `${prefix}-${i}-`.padEnd(128, 'x');
    for (let i = 0; i < 130_000; i++) store.addThread(id('p', i % 100), id('t', i));
    store.setIdleWeight({ sandboxes: 5 });
    store.flush();
    const served = await serveWatch(store);
    let synced!: () => void;
    let refused!: (error: Error) => void;
    const wasSynced = new Promise<void>((resolve, reject) => ((synced = resolve), (refused = reject)));
    // A refused snapshot is asked for again only 30 s later, on a clock that stands still here: fail at once.
    const warn = (fields: object, msg?: string): void => refused(new Error(`${msg} ${JSON.stringify(fields)}`));
    const part = newPart({
      logger: { ...quietLogger, warn },
      onChange: () => {
        if (part.states()[0]?.runtime.available) synced();
      },
    });
    try {
      const r0 = standIn('r0', 1, true, undefined, { fetch: (_url, init) => fetch(`${served.base}/watch`, init) });
      part.attach(r0.tunnel);
      await wasSynced;
      const [state] = part.states();
      assert.equal(state!.threads.length, 130_000);
      assert.deepEqual(state!.runtime.idleWeight, { sandboxes: 5 });
      const checked = parseWith(runtimeStateSchema, state);
      assert.ok(checked.ok, checked.ok ? '' : checked.error);
    } finally {
      part.close();
      served.close();
      store.close();
    }
  });
});

describe("a replica's part, logging a runtime", () => {
  it('tells of a runtime whose tunnel lines the endpoint holds back (it flaps) at debug only', async () => {
    const clock = new ManualClock(1_000_000);
    const lines: string[] = [];
    const line = (level: string) => (obj: object, msg?: string) =>
      void lines.push(`${level} ${(obj as { runtime?: string }).runtime} ${msg}`);
    const part = newPart({ clock, logger: byLevel(line) });
    const loud = standIn('r-said', 1);
    const quiet = standIn('r-held', 2);
    Object.assign(quiet.tunnel, { quiet: true });
    for (const s of [loud, quiet]) {
      part.attach(s.tunnel);
      s.lose();
      part.detach(s.tunnel, 'connection closed');
    }
    await clock.advance(REDIAL_WAIT_MS);
    part.close();
    const of = (runtime: string): string[] => lines.filter((l) => l.split(' ')[1] === runtime);
    assert.deepEqual(of('r-said'), [
      'info r-said runtime joined',
      'info r-said runtime left',
      'info r-said holding requests for a lost runtime until it redials',
      'warn r-said lost runtime not back: its requests are refused',
    ]);
    assert.deepEqual(of('r-held'), [
      'debug r-held runtime joined',
      'debug r-held runtime left',
      'debug r-held holding requests for a lost runtime until it redials',
      'debug r-held lost runtime not back: its requests are refused',
    ]);
  });
});

describe("a replica's part, when its runtime streams an event that never ends", () => {
  it('closes the stream after WATCH_LIMITS.eventCharsMax characters and says so at warn', async () => {
    // Any holder of a join token can send this; unbounded, the watcher's parser would hold it all.
    const capBytes = WATCH_LIMITS.eventCharsMax + 32 * 1024 * 1024;
    const endless = await serveEndlessLine(capBytes);
    let warned!: (fields: object) => void;
    const warning = new Promise<object>((resolve) => (warned = resolve));
    const logger = {
      ...quietLogger,
      warn: (fields: object, msg?: string) => void (msg === 'runtime state event too large' && warned(fields)),
    };
    const part = newPart({ logger });
    try {
      const r0 = standIn('r0', 1, true, undefined, { fetch: (_url, init) => fetch(`${endless.base}/watch`, init) });
      part.attach(r0.tunnel);
      const outcome = await endless.outcome;
      assert.equal(outcome.closed, true, `the stream was still open after ${outcome.bytes} bytes`);
      // Kernel socket buffers hold some bytes the watcher never read.
      assert.ok(outcome.bytes < WATCH_LIMITS.eventCharsMax + 16 * 1024 * 1024, `${outcome.bytes} bytes sent`);
      assert.deepEqual(await warning, {
        runtime: 'r0',
        err: `watch event over ${WATCH_LIMITS.eventCharsMax} characters: stream closed`,
      });
      assert.equal(part.states()[0]!.runtime.available, false, 'the runtime is not schedulable without a snapshot');
    } finally {
      part.close();
      endless.close();
    }
  });
});

/**
 * A fake runtime's `/watch` that streams one `data:` line that never ends, with backpressure, until the
 * client closes it or `capBytes` are out; `outcome` tells which, and how many bytes were sent.
 */
async function serveEndlessLine(capBytes: number) {
  let settle!: (outcome: { closed: boolean; bytes: number }) => void;
  const outcome = new Promise<{ closed: boolean; bytes: number }>((resolve) => (settle = resolve));
  const chunk = 'x'.repeat(64 * 1024);
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('event: snapshot\nid: 1\ndata: ');
    let bytes = 0;
    let closed = false;
    res.on('close', () => ((closed = true), settle({ closed: true, bytes })));
    const pump = (): void => {
      while (!closed) {
        if (bytes >= capBytes) return settle({ closed: false, bytes });
        bytes += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
    };
    pump();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    outcome,
    close(): void {
      server.closeAllConnections();
      server.close();
    },
  };
}
