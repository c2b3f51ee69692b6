// Placements a replica decided that no epoch shows yet, on a manual clock.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '@switchyard/clock/testing';
import type { Runtime, RuntimeState, ScheduleRequest } from '@switchyard/protocol';
import { ClusterView } from '../src/index.ts';
import { parseScheduleRequest } from '../src/schedule-request.ts';

const PENDING_TTL_MS = 30_000;

function runtime(id: string, sandboxes: number): RuntimeState {
  const rt: Runtime = {
    id,
    classes: ['default'],
    metadata: {},
    version: '1.0.0',
    idleWeight: { sandboxes },
    available: true,
    owner: 's0',
    generation: 1,
  };
  return { runtime: rt, processes: [], threads: [] };
}

function request(processId: string): ScheduleRequest {
  const parsed = parseScheduleRequest({ class: 'default', processId, sticky: true });
  assert.ok(parsed.ok);
  return parsed.value;
}

/** Schedules `p1`, then commits an epoch in which the runtime chosen is full and does not show it yet. */
function placedThenFull(clock: ManualClock): { view: ClusterView; first: string } {
  const view = new ClusterView({ clock, pendingTtlMs: PENDING_TTL_MS });
  view.snapshot(1, 1, [runtime('r1', 4), runtime('r2', 4)]);
  const decision = view.schedule(request('p1'));
  assert.ok(decision.ok);
  const first = decision.runtime;
  view.snapshot(2, 1, [runtime('r1', first === 'r1' ? 0 : 4), runtime('r2', first === 'r2' ? 0 : 4)]);
  return { view, first };
}

describe('a pending placement', () => {
  it('holds the process to its runtime until pendingTtlMs, whichever way the wall clock steps', async () => {
    for (const stepMs of [3_600_000, -3_600_000]) {
      const clock = new ManualClock();
      const { view, first } = placedThenFull(clock);
      clock.stepWall(stepMs);
      await clock.advance(PENDING_TTL_MS - 1);
      const again = view.schedule(request('p1'));
      assert.ok(again.ok);
      assert.equal(again.runtime, first, `step ${stepMs} ms: not placed a second time elsewhere`);
      await clock.advance(1);
      const later = view.schedule(request('p1'));
      assert.ok(later.ok);
      assert.notEqual(later.runtime, first, `step ${stepMs} ms: forgotten at pendingTtlMs`);
    }
  });
});

describe("a replica's view of runtime id claims at other replicas", () => {
  const FP = 'AAAAAAAAAAAAAAAA';
  const held = (id: string, extra: Partial<Runtime>): RuntimeState => {
    const state = runtime(id, 4);
    return { ...state, runtime: { ...state.runtime, ...extra } };
  };
  const cases: { name: string; state: RuntimeState; self: string; claim: string | undefined }[] = [
    {
      name: 'names the fingerprint of a live tunnel at another replica',
      state: held('r', { tokenFingerprint: FP }),
      self: 's1',
      claim: FP,
    },
    {
      name: 'names none for a tunnel the replica holds itself',
      state: held('r', { tokenFingerprint: FP }),
      self: 's0',
      claim: undefined,
    },
    {
      name: 'names none for a runtime no longer live (its replica silent, or lost)',
      state: held('r', { tokenFingerprint: FP, available: false }),
      self: 's1',
      claim: undefined,
    },
    {
      name: 'names none for a runtime reported without one (a replica of an earlier release)',
      state: held('r', {}),
      self: 's1',
      claim: undefined,
    },
  ];
  for (const t of cases) {
    it(t.name, () => {
      const view = new ClusterView({ clock: new ManualClock(0) });
      view.snapshot(1, 1, [t.state]);
      assert.equal(view.claimElsewhere('r', t.self), t.claim);
      assert.equal(view.claimElsewhere('unknown', t.self), undefined);
    });
  }
});

describe("a replica's view of the runtime processes holding ids at other replicas", () => {
  const INSTANCE = 'instance-0123456789ab';
  const held = (extra: Partial<Runtime>): RuntimeState => {
    const state = runtime('r', 4);
    return { ...state, runtime: { ...state.runtime, ...extra } };
  };
  const cases: { name: string; state: RuntimeState; self: string; instance: string | undefined }[] = [
    {
      name: 'names the instance of a live tunnel at another replica',
      state: held({ instance: INSTANCE }),
      self: 's1',
      instance: INSTANCE,
    },
    {
      name: 'names none for a tunnel the replica holds itself',
      state: held({ instance: INSTANCE }),
      self: 's0',
      instance: undefined,
    },
    {
      name: 'names none for a runtime no longer live (its replica silent or found it gone: a successor may join)',
      state: held({ instance: INSTANCE, available: false }),
      self: 's1',
      instance: undefined,
    },
    {
      name: 'names none for a runtime reported without one (a runtime or replica of an earlier release)',
      state: held({}),
      self: 's1',
      instance: undefined,
    },
  ];
  for (const t of cases) {
    it(t.name, () => {
      const view = new ClusterView({ clock: new ManualClock(0) });
      view.snapshot(1, 1, [t.state]);
      assert.equal(view.instanceElsewhere('r', t.self), t.instance);
      assert.equal(view.instanceElsewhere('unknown', t.self), undefined);
    });
  }
});
