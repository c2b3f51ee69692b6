import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Clock } from '@switchyard/clock';
import { ManualClock } from '@switchyard/clock/testing';
import { LeaderElector, MemoryLeaseStore, createMemoryLock } from '@switchyard/election';
import { TERM_MAX } from '@switchyard/protocol';
import type { LeaderElectorOptions, LeadershipContext, LeaseLock, LeaseRecord } from '@switchyard/election';

const START_MS = 1_000_000;

interface Harness {
  readonly clock: ManualClock;
  readonly store: MemoryLeaseStore;
  readonly events: string[];
  readonly faulty: Set<string>;
  elector(id: string, extra?: Partial<LeaderElectorOptions>): LeaderElector & { ctx?: LeadershipContext };
}

let open: LeaderElector[] = [];
afterEach(async () => {
  await Promise.all(open.map((e) => e.stop()));
  open = [];
});

function harness(): Harness {
  const clock = new ManualClock(START_MS);
  const store = new MemoryLeaseStore();
  const events: string[] = [];
  const faulty = new Set<string>();
  return {
    clock,
    store,
    events,
    faulty,
    elector(id, extra = {}) {
      const lock = createMemoryLock(store, {
        intercept: () => {
          if (faulty.has(id)) throw new Error(`${id}: API unavailable`);
        },
      });
      const elector: LeaderElector & { ctx?: LeadershipContext } = new LeaderElector({
        lock,
        identity: id,
        clock,
        random: () => 0,
        onStartedLeading: (ctx) => {
          elector.ctx = ctx;
          events.push(`${id} started term ${ctx.term} @${clock.now() - START_MS}`);
        },
        onStoppedLeading: () => events.push(`${id} stopped @${clock.now() - START_MS}`),
        ...extra,
      });
      open.push(elector);
      return elector;
    },
  };
}

describe('LeaderElector on a manual clock', () => {
  it('a single elector acquires at once, with term 0, and renews every retry period', async () => {
    const h = harness();
    const a = h.elector('a');
    a.start();
    await h.clock.advance(0);
    assert.equal(a.isLeader, true);
    assert.equal(a.term, 0);
    assert.deepEqual(a.leader, { holder: 'a', term: 0 });
    assert.deepEqual(h.events, ['a started term 0 @0']);
    await h.clock.advance(2_000);
    assert.equal(h.store.read()?.renewTime.getTime(), START_MS + 2_000);
    assert.equal(h.store.read()?.acquireTime.getTime(), START_MS);
    assert.equal(h.store.read()?.leaseDurationSeconds, 15);
  });

  it('a second elector waits as long as the leader renews', async () => {
    const h = harness();
    const a = h.elector('a');
    const b = h.elector('b');
    a.start();
    await h.clock.advance(0);
    b.start();
    for (let t = 0; t < 60_000; t += 500) {
      await h.clock.advance(500);
      assert.equal(a.isLeader, true);
      assert.equal(b.isLeader, false);
    }
    assert.deepEqual(b.leader, { holder: 'a', term: 0 });
  });

  it('when the leader stops, the other takes over within one retry period with the next term', async () => {
    const h = harness();
    const a = h.elector('a');
    const b = h.elector('b');
    a.start();
    await h.clock.advance(0);
    b.start();
    await h.clock.advance(700);
    const signal = a.ctx!.signal;
    await a.stop();
    assert.equal(signal.aborted, true);
    assert.equal(h.store.read()?.holderIdentity, undefined, 'a released the lease');
    assert.equal(h.store.read()?.leaseDurationSeconds, 1);
    await h.clock.advance(2_000);
    assert.equal(b.isLeader, true);
    assert.equal(b.term, 1);
    assert.deepEqual(h.events, ['a started term 0 @0', 'a stopped @700', 'b started term 1 @2000']);
  });

  it('the term increments on every transition', async () => {
    const h = harness();
    const electors = ['a', 'b', 'c', 'd'].map((id) => h.elector(id));
    for (const e of electors) e.start();
    const terms: number[] = [];
    for (let round = 0; round < electors.length; round++) {
      await h.clock.advance(2_000);
      const leaders = electors.filter((e) => e.isLeader);
      assert.equal(leaders.length, 1);
      terms.push(leaders[0]!.term!);
      await leaders[0]!.stop();
    }
    assert.deepEqual(terms, [0, 1, 2, 3]);
  });

  it('a leader whose renewals fail stops leading before its lease can expire, then leads again with a new term', async () => {
    const h = harness();
    const a = h.elector('a');
    a.start();
    await h.clock.advance(0);
    const first = a.ctx!;
    h.faulty.add('a');
    // Last good renewal started at 0; the claim ends at 0 + renewDeadline (10 s), lease expiry for others at >= 15 s.
    await h.clock.advance(9_999);
    assert.equal(a.isLeader, true);
    await h.clock.advance(1);
    assert.equal(a.isLeader, false);
    assert.equal(first.signal.aborted, true);
    h.faulty.delete('a');
    await h.clock.advance(2_000);
    assert.equal(a.isLeader, true);
    assert.equal(a.term, 1, 'a new leadership gets a new term even for the same holder');
    assert.notEqual(a.ctx, first);
  });

  it('warns when leadership is lost, and only notes it when stop() ends it', async () => {
    const h = harness();
    const lines: string[] = [];
    const logger = {
      info: (_: object, message: string) => lines.push(`info ${message}`),
      warn: (_: object, message: string) => lines.push(`warn ${message}`),
    };
    const a = h.elector('a', { logger });
    a.start();
    await h.clock.advance(0);
    h.faulty.add('a');
    await h.clock.advance(10_000);
    h.faulty.delete('a');
    await h.clock.advance(2_000);
    assert.equal(a.isLeader, true);
    await a.stop();
    assert.deepEqual(
      lines.filter((l) => l.endsWith('stopped leading')),
      ['warn stopped leading', 'info stopped leading'],
    );
  });

  it('a candidate counts lease expiry from when it observed the record, not from the renewTime in it', async () => {
    const h = harness();
    const a = h.elector('a');
    const b = h.elector('b');
    a.start();
    await h.clock.advance(1_000);
    h.faulty.add('a'); // a crashed: its last renewal says renewTime = 0
    await h.clock.advance(11_000);
    b.start(); // b first sees that record at 12 s: by renewTime it expired at 15 s, by observation at 27 s
    let takeoverMs: number | undefined;
    for (let t = 0; t < 30_000 && takeoverMs === undefined; t += 100) {
      await h.clock.advance(100);
      assert.ok(!(a.isLeader && b.isLeader), `two leaders at ${h.clock.now() - START_MS}`);
      if (b.isLeader) takeoverMs = h.clock.now() - START_MS;
    }
    assert.ok(takeoverMs !== undefined && takeoverMs >= 27_000 && takeoverMs <= 29_000, `took over at ${takeoverMs}`);
    assert.equal(b.term, 1);
  });

  it('a candidate tries again the moment the lease it saw would expire, not at its next jittered attempt', async () => {
    const h = harness();
    const a = h.elector('a');
    a.start();
    await h.clock.advance(1_000);
    h.faulty.add('a'); // a crashed after its renewal at 0
    // Attempts every 2 s x (1 + 0.99 x 1.2) = 4,376 ms: at 1,000, 5,376, 9,752, 14,128, then 18,504.
    const b = h.elector('b', { random: () => 0.99 });
    b.start(); // b observes the record at 1,000: it expires at 16,000 in b's eyes
    let takeoverMs: number | undefined;
    for (let t = 0; t < 20_000 && takeoverMs === undefined; t += 100) {
      await h.clock.advance(100);
      assert.ok(!(a.isLeader && b.isLeader), `two leaders at ${h.clock.now() - START_MS}`);
      if (b.isLeader) takeoverMs = h.clock.now() - START_MS;
    }
    assert.equal(takeoverMs, 16_000);
    assert.equal(b.term, 1);
  });

  it('reports each new holder to onNewLeader, including a free lease', async () => {
    const h = harness();
    const seen: string[] = [];
    const a = h.elector('a');
    const b = h.elector('b', { onNewLeader: (holder, term) => seen.push(`${holder ?? '(free)'}:${term}`) });
    a.start();
    await h.clock.advance(0);
    b.start();
    await h.clock.advance(0);
    await a.stop();
    await h.clock.advance(2_000);
    assert.deepEqual(seen, ['a:0', '(free):0', 'b:1']);
    assert.deepEqual(b.leader, { holder: 'b', term: 1 });
  });

  it('keeps running when a callback throws or rejects', async () => {
    const h = harness();
    const warnings: string[] = [];
    const a = h.elector('a', {
      onStartedLeading: () => Promise.reject(new Error('boom')),
      onNewLeader: () => {
        throw new Error('bang');
      },
      logger: { info: () => {}, warn: (_fields, message) => warnings.push(message) },
    });
    a.start();
    await h.clock.advance(4_000);
    assert.equal(a.isLeader, true);
    assert.ok(warnings.filter((m) => m === 'election callback failed').length >= 2);
  });

  it('stop is idempotent, works before start, and leaves no timer behind', async () => {
    const h = harness();
    const idle = h.elector('idle');
    await idle.stop();
    idle.start();
    await h.clock.advance(2_000);
    assert.equal(idle.isLeader, false);
    const a = h.elector('a');
    a.start();
    await h.clock.advance(0);
    await Promise.all([a.stop(), a.stop()]);
    await a.stop();
    assert.equal(a.isLeader, false);
    assert.equal(h.clock.pendingTimers, 0);
    assert.equal(h.events.filter((e) => e.startsWith('a stopped')).length, 1);
  });

  it('a hung lock call times out after attemptTimeoutMs, so stop is never blocked and leadership ends on time', async () => {
    const h = harness();
    let hang = false;
    const lock = createMemoryLock(h.store, { intercept: () => (hang ? new Promise<void>(() => {}) : undefined) });
    const a = new LeaderElector({ lock, identity: 'a', clock: h.clock, random: () => 0 });
    open.push(a);
    a.start();
    await h.clock.advance(0);
    hang = true;
    await h.clock.advance(10_000);
    assert.equal(a.isLeader, false);
    await h.clock.advance(500);
    await a.stop();
    assert.equal(h.clock.pendingTimers, 0);
  });
});

/** Electors on one manual clock over a Lease that can be deleted (kubectl delete lease, a restore). */
function deletableLease(): {
  clock: ManualClock;
  started: string[];
  read(): LeaseRecord | undefined;
  /** Deletes the Lease; `recreated` is then created at once, as by an elector that won the race to do it. */
  delete(recreated?: LeaseRecord): void;
  elector(id: string): LeaderElector;
} {
  const clock = new ManualClock(START_MS);
  let store = new MemoryLeaseStore();
  // get finds nothing after a delete, and create starts a new object.
  const lock: LeaseLock = {
    get: async () => store.read(),
    create: async (record) => store.create(record),
    update: async (record) => store.update(record),
    describe: () => 'deletable',
  };
  const started: string[] = [];
  return {
    clock,
    started,
    read: () => store.read(),
    delete(recreated) {
      store = new MemoryLeaseStore();
      if (recreated) store.create(recreated);
    },
    elector(id) {
      const e = new LeaderElector({
        lock,
        identity: id,
        clock,
        random: () => 0,
        onStartedLeading: ({ term }) => void started.push(`${id}:${term}`),
      });
      open.push(e);
      return e;
    },
  };
}

/** `first` takes the lease, then `second` starts behind it; 700 ms later both run, `first` leading. */
async function leaderAndCandidate(
  lease: ReturnType<typeof deletableLease>,
  first: string,
  second: string,
): Promise<[LeaderElector, LeaderElector]> {
  const leader = lease.elector(first);
  const candidate = lease.elector(second);
  leader.start();
  await lease.clock.advance(0);
  candidate.start();
  await lease.clock.advance(700);
  return [leader, candidate];
}

describe('a lease deleted under running electors', () => {
  it('is created again with a term above every term they saw, so fenced followers take the next leader', async () => {
    const lease = deletableLease();
    const { clock } = lease;
    const [a, b] = await leaderAndCandidate(lease, 'a', 'b');
    await a.stop();
    await clock.advance(2_000);
    assert.deepEqual(lease.started, ['a:0', 'b:1'], 'b leads with term 1; followers now fence off anything below 1');
    lease.delete();
    await clock.advance(2_000); // b's renewal finds no lease and creates one
    await b.stop();
    const c = lease.elector('c');
    c.start();
    await clock.advance(2_000);
    assert.equal(c.isLeader, true);
    assert.ok(c.term! > 1, `the next leader's term (${c.term}) is above 1`);
    assert.ok(lease.read()!.leaseTransitions > 1);
  });

  it('a leader whose renewal finds another holder steps down at once, not at its renew deadline', async () => {
    const lease = deletableLease();
    const { clock } = lease;
    const [a, b] = await leaderAndCandidate(lease, 'a', 'b');
    // Deleted between a's renewals and created at once by b (which had read a's, at term 0): the lease a
    // renewed no longer exists, and nothing makes b wait for a's claim to run out.
    const at = new Date(clock.now());
    lease.delete({
      holderIdentity: 'b',
      leaseDurationSeconds: 15,
      acquireTime: at,
      renewTime: at,
      leaseTransitions: 1,
    });
    await clock.advance(2_000); // a's renewal reads the lease b holds; b takes it up
    assert.equal(b.isLeader, true);
    assert.equal(a.isLeader, false, 'a leads no longer once it has read the lease held by b, not until 10 s');
    assert.equal(lease.read()!.holderIdentity, 'b');
    assert.deepEqual(lease.started, ['a:0', 'b:2']);
  });

  it('never leads again at a term it led, when the lease is created again below it by one that never read it', async () => {
    const lease = deletableLease();
    const { clock } = lease;
    const [b, a] = await leaderAndCandidate(lease, 'b', 'a');
    await b.stop();
    await clock.advance(2_000);
    assert.deepEqual(lease.started, ['b:0', 'a:1']);
    // Created again at term 0 by an elector that then died: nobody told a of it, and a loses its renewals.
    const at = new Date(clock.now());
    lease.delete({
      holderIdentity: 'gone',
      leaseDurationSeconds: 15,
      acquireTime: at,
      renewTime: at,
      leaseTransitions: 0,
    });
    await clock.advance(30_000); // a steps down as it reads 'gone', and takes the lease once that expired
    assert.equal(a.isLeader, true);
    assert.deepEqual(lease.started, ['b:0', 'a:1', 'a:2'], 'a leads again above its own term 1, not at it');
  });
});

describe('a leader told of a higher term', () => {
  it('steps down at once and retakes its own lease above that term at its next attempt; a lower one changes nothing', async () => {
    const h = harness();
    const a = h.elector('a');
    const b = h.elector('b');
    a.start();
    await h.clock.advance(0);
    b.start();
    await h.clock.advance(700);
    const first = a.ctx!.signal;
    a.termExists(4); // e.g. a follower that saw term 4 fenced off a's messages of term 0
    assert.equal(first.aborted, true, 'leader work of term 0 ends at once');
    assert.equal(a.isLeader, false);
    await h.clock.advance(1_300);
    assert.equal(a.term, 5);
    assert.equal(h.store.read()!.leaseTransitions, 5);
    assert.equal(b.isLeader, false, 'the lease stayed held: nobody else took it meanwhile');
    a.termExists(3);
    a.termExists(4);
    await h.clock.advance(2_000);
    assert.equal(a.ctx!.signal.aborted, false, 'a term below ours, even one told before, changes nothing');
    assert.deepEqual(h.events, ['a started term 0 @0', 'a stopped @700', 'a started term 5 @2000']);
  });

  it('takes its next leadership above that term when it is not leading', async () => {
    const h = harness();
    const a = h.elector('a');
    a.termExists(7);
    a.start();
    await h.clock.advance(0);
    assert.equal(a.term, 8, 'a lease created above the term it was told of');
  });

  // A Kubernetes Lease stores the term as an int32 and refuses a write past it: a leader that stepped down to
  // lead above such a term could never lead again, nor could any elector told of it.
  it('ignores a term that leaves no term a Lease can store above it, and keeps leading at its own', async () => {
    const warnings: string[] = [];
    const logger = { info() {}, warn: (_fields: object, message: string) => void warnings.push(message) };
    const h = harness();
    const a = h.elector('a', { logger });
    a.start();
    await h.clock.advance(0);
    for (const term of [TERM_MAX, TERM_MAX + 1, 2 ** 40]) a.termExists(term);
    await h.clock.advance(4_000);
    assert.equal(a.ctx!.signal.aborted, false);
    assert.equal(h.store.read()!.leaseTransitions, 0);
    assert.deepEqual(h.events, ['a started term 0 @0']);
    assert.equal(warnings.filter((w) => w === 'ignored a term no lease can be taken above').length, 3);
  });

  it('never writes a term past TERM_MAX, even above a lease that holds it', async () => {
    const h = harness();
    const at = new Date(h.clock.now());
    h.store.create({
      holderIdentity: 'gone',
      leaseDurationSeconds: 15,
      acquireTime: at,
      renewTime: at,
      leaseTransitions: TERM_MAX,
    });
    const a = h.elector('a');
    a.start();
    await h.clock.advance(30_000); // long past the expiry of gone's lease
    assert.equal(a.isLeader, false);
    assert.equal(h.store.read()!.holderIdentity, 'gone');
    assert.equal(h.store.read()!.leaseTransitions, TERM_MAX);
  });
});

/** A clock of its own over the shared manual one: same monotonic time and timers, a wall clock it can step. */
function hostClock(manual: ManualClock): Clock & { stepWall(ms: number): void } {
  let offsetMs = 0;
  return {
    now: () => manual.now() + offsetMs,
    monotonicNow: () => manual.monotonicNow(),
    setTimeout: (fn, delayMs) => manual.setTimeout(fn, delayMs),
    stepWall: (ms) => void (offsetMs += ms),
  };
}

describe('an elector whose wall clock is stepped (NTP, an operator)', () => {
  it('a candidate whose clock jumps forward past the lease duration leaves a live leader its lease', async () => {
    const h = harness();
    const a = h.elector('a');
    const bClock = hostClock(h.clock);
    const b = h.elector('b', { clock: bClock });
    a.start();
    await h.clock.advance(0);
    b.start();
    await h.clock.advance(1_000);
    // a's API calls fail for a while (well within its renew deadline): b sees the same record until they work.
    h.faulty.add('a');
    bClock.stepWall(60_000);
    for (let t = 0; t < 30_000; t += 500) {
      await h.clock.advance(500);
      if (t === 6_000) h.faulty.delete('a');
      assert.equal(b.isLeader, false, `b took the lease of a live leader at ${h.clock.monotonicNow() - START_MS} ms`);
      assert.equal(a.isLeader, true);
    }
    assert.deepEqual(h.events, ['a started term 0 @0']);
  });

  it('a leader whose clock jumps back during a renewal still stops leading at its renew deadline', async () => {
    const h = harness();
    const aClock = hostClock(h.clock);
    let stepDuringNextCall = false;
    let failing = false;
    const lock = createMemoryLock(h.store, {
      intercept: () => {
        if (failing) throw new Error('a: API unavailable');
        if (stepDuringNextCall) aClock.stepWall(-60_000);
        stepDuringNextCall = false;
      },
    });
    const a = h.elector('a', { lock, clock: aClock });
    const b = h.elector('b');
    a.start();
    await h.clock.advance(0);
    b.start();
    stepDuringNextCall = true;
    await h.clock.advance(2_000); // a renews at 2 s, its clock stepped back 60 s mid-call
    failing = true; // then its renewals fail: its claim ends at 2 + 10 s, b may take over from 2 + 15 s
    let stoppedAtMs: number | undefined;
    for (let t = 0; t < 90_000; t += 500) {
      await h.clock.advance(500);
      const atMs = h.clock.monotonicNow() - START_MS;
      assert.ok(!(a.isLeader && b.isLeader), `a and b both lead at ${atMs} ms`);
      if (!a.isLeader) stoppedAtMs ??= atMs;
    }
    assert.equal(stoppedAtMs, 12_000);
    assert.equal(b.isLeader, true);
  });
});
