import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock, flushMicrotasks } from '@switchyard/clock/testing';
import { builtinEngine } from '../src/builtin.ts';
import { DeathFlag, type Engine, type EngineContext, type SandboxInstance } from '../src/engine.ts';
import { withWarmPool } from '../src/warm-pool.ts';
import { captureLogger } from './fixtures/harness.ts';

const ctx: EngineContext = { runtimeId: 'rt', className: 'demo', logger: captureLogger(), onCancelled() {} };

/** The builtin engine, counting the instances it starts. */
function counted(clock: ManualClock): Engine & { started: number } {
  const inner = builtinEngine(clock);
  const engine = {
    started: 0,
    create: (c: EngineContext) => {
      engine.started++;
      return inner.create(c);
    },
  };
  return engine;
}

interface Case {
  readonly name: string;
  readonly size: number;
  readonly refillDelayMs: number;
  readonly handOuts: number;
  /** Starts seen (after the initial fill) right after the hand-outs, then after each advance. */
  readonly steps: readonly { readonly advanceMs: number; readonly startedAfter: number; readonly available: number }[];
}

const cases: Case[] = [
  {
    name: 'a hand-out starts its replacement only once refillDelayMs has passed',
    size: 2,
    refillDelayMs: 250,
    handOuts: 1,
    steps: [
      { advanceMs: 0, startedAfter: 0, available: 1 },
      { advanceMs: 249, startedAfter: 0, available: 1 },
      { advanceMs: 1, startedAfter: 1, available: 2 },
    ],
  },
  {
    name: 'hand-outs within the delay share one refill that tops the pool up to its size',
    size: 3,
    refillDelayMs: 100,
    handOuts: 2,
    steps: [
      { advanceMs: 0, startedAfter: 0, available: 1 },
      { advanceMs: 100, startedAfter: 2, available: 3 },
      { advanceMs: 1000, startedAfter: 2, available: 3 },
    ],
  },
  {
    name: 'a zero delay refills at once',
    size: 1,
    refillDelayMs: 0,
    handOuts: 1,
    steps: [{ advanceMs: 0, startedAfter: 1, available: 1 }],
  },
  {
    name: 'a hand-out from an empty pool starts the instance on demand and still refills later',
    size: 1,
    refillDelayMs: 50,
    handOuts: 2,
    steps: [
      { advanceMs: 0, startedAfter: 1, available: 0 },
      { advanceMs: 50, startedAfter: 2, available: 1 },
    ],
  },
];

describe('warm pool refill', () => {
  for (const c of cases) {
    it(c.name, async () => {
      const clock = new ManualClock();
      const engine = counted(clock);
      const pool = withWarmPool(engine, { size: c.size, refillDelayMs: c.refillDelayMs, clock }, ctx);
      try {
        await flushMicrotasks();
        assert.equal(pool.available, c.size, 'the pool fills at once on start');
        const initial = engine.started;
        for (let i = 0; i < c.handOuts; i++) await pool.create(ctx);
        for (const step of c.steps) {
          await clock.advance(step.advanceMs);
          assert.equal(engine.started - initial, step.startedAfter, `starts after +${step.advanceMs} ms`);
          assert.equal(pool.available, step.available, `available after +${step.advanceMs} ms`);
        }
      } finally {
        await pool.close();
      }
    });
  }

  it('backs off a server that fails to start: a hand-out starts one, the pool retries after 1 s, then 2 s', async () => {
    const clock = new ManualClock();
    let started = 0;
    const failing: Engine = {
      create: async () => {
        started++;
        throw new Error('the server exited before it answered initialize');
      },
    };
    const pool = withWarmPool(failing, { size: 3, refillDelayMs: 250, clock }, ctx);
    try {
      await flushMicrotasks();
      assert.equal(started, 3, 'the first fill');
      for (let i = 0; i < 5; i++) await assert.rejects(pool.create(ctx), /exited/);
      assert.equal(started, 8, 'one start per hand-out');
      await clock.advance(250);
      assert.equal(started, 8, 'no refill while the pool backs off');
      await clock.advance(750);
      assert.equal(started, 11, 'a refill 1 s after the failed one');
      await clock.advance(1_999);
      assert.equal(started, 11);
      await clock.advance(1);
      assert.equal(started, 14, 'the next 2 s after that');
    } finally {
      await pool.close();
    }
  });

  it('close cancels a pending refill, so nothing starts afterwards', async () => {
    const clock = new ManualClock();
    const engine = counted(clock);
    const pool = withWarmPool(engine, { size: 1, refillDelayMs: 100, clock }, ctx);
    await flushMicrotasks();
    await pool.create(ctx);
    await pool.close();
    await pool.close();
    const before = engine.started;
    await clock.advance(1000);
    assert.equal(engine.started, before);
    assert.equal(clock.pendingTimers, 0);
  });
});

/** An engine whose instances die when the test says, counting its starts and destroys. */
function mortal(): Engine & { started: number; destroyed: number; live: DeathFlag[] } {
  const engine: Engine & { started: number; destroyed: number; live: DeathFlag[] } = {
    started: 0,
    destroyed: 0,
    live: [],
    create: async (): Promise<SandboxInstance> => {
      engine.started++;
      const death = new DeathFlag();
      engine.live.push(death);
      return {
        capabilities: {},
        bind() {},
        register: () => () => {},
        get dead() {
          return death.dead;
        },
        onDead: (listener) => death.onDead(listener),
        destroy: async () => {
          engine.destroyed++;
          death.kill();
        },
      };
    },
  };
  return engine;
}

describe('warm pool members that die while waiting', () => {
  it('replaces one that lived at once, and one that died young later, longer each time in a row', async () => {
    const clock = new ManualClock();
    const logger = captureLogger();
    const engine = mortal();
    const pool = withWarmPool(engine, { size: 1, refillDelayMs: 100, clock }, { ...ctx, logger });
    const dieNow = async (): Promise<void> => {
      engine.live.at(-1)!.kill();
      await flushMicrotasks();
    };
    try {
      await flushMicrotasks();
      assert.equal(engine.started, 1);
      await clock.advance(5_000);
      await dieNow();
      assert.equal(engine.started, 2, 'one that lived 5 s is replaced at once');
      for (const retryInMs of [1_000, 2_000, 4_000]) {
        await dieNow();
        await clock.advance(retryInMs - 1);
        assert.equal(pool.available, 0, `no member within ${retryInMs} ms`);
        const startedBefore: number = engine.started;
        await clock.advance(1);
        assert.equal(engine.started, startedBefore + 1, `replaced after ${retryInMs} ms`);
      }
      const young = logger.lines.filter((l) => l.level === 'warn' && l.obj.event === 'pool.died_young');
      assert.deepEqual(
        young.map((l) => l.obj.retryInMs),
        [1_000, 2_000, 4_000],
      );
      await clock.advance(5_000);
      await dieNow();
      assert.equal(engine.started, 6, 'one that lived again resets the backoff');
    } finally {
      await pool.close();
    }
  });
});

describe('warm pool members that die', () => {
  it('one that dies while waiting is destroyed, so what it held (an upstream session) is freed', async () => {
    const clock = new ManualClock();
    const engine = mortal();
    const pool = withWarmPool(engine, { size: 1, refillDelayMs: 100, clock }, ctx);
    try {
      await flushMicrotasks();
      engine.live[0]!.kill();
      await flushMicrotasks();
      assert.equal(engine.destroyed, 1);
    } finally {
      await pool.close();
    }
  });

  it('one already handed out that dies leaves the pending refill delay as it is', async () => {
    const clock = new ManualClock();
    const engine = mortal();
    const pool = withWarmPool(engine, { size: 1, refillDelayMs: 100, clock }, ctx);
    try {
      await flushMicrotasks();
      await pool.create(ctx);
      await clock.advance(50);
      engine.live[0]!.kill();
      await flushMicrotasks();
      assert.equal(engine.started, 1, 'no start before the refill delay is up');
      await clock.advance(50);
      assert.equal(engine.started, 2);
    } finally {
      await pool.close();
    }
  });

  it('one already handed out that dies leaves the backoff after a member that died young as it is', async () => {
    const clock = new ManualClock();
    const engine = mortal();
    const pool = withWarmPool(engine, { size: 1, refillDelayMs: 0, clock }, ctx);
    try {
      await flushMicrotasks();
      await pool.create(ctx);
      await flushMicrotasks();
      assert.equal(engine.started, 2, 'refilled at once');
      engine.live[1]!.kill(); // the new member dies young: its replacement waits 1 s
      await flushMicrotasks();
      engine.live[0]!.kill(); // the handed-out one dies
      await flushMicrotasks();
      assert.equal(engine.started, 2, 'no start before the backoff is up');
      await clock.advance(1_000);
      assert.equal(engine.started, 3);
    } finally {
      await pool.close();
    }
  });
});
