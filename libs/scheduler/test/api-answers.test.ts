// The operator API's answer schemas (libs/protocol) against a real replica (with
// a real runtime joined over its tunnel): what it answers must parse with
// them, or `switchyard status` and `explain` would refuse a real scheduler.
// And an answer of another shape is refused with the path that is wrong.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  apiErrorSchema,
  epochInfoSchema,
  parseWith,
  runtimesAnswerSchema,
  runtimesTableSchema,
  scheduleResponseSchema,
} from '@switchyard/protocol';
import type { RuntimeNode } from '@switchyard/runtime';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { startReplicas, startRuntime, until } from './support.ts';

async function answerOf(url: string, init?: RequestInit): Promise<{ status: number; body: unknown }> {
  const response = await fetch(url, { ...init, signal: AbortSignal.timeout(10_000) });
  return { status: response.status, body: await response.json() };
}

function explain(url: string, request: Record<string, unknown>): Promise<{ status: number; body: unknown }> {
  return answerOf(`${url}/api/schedule`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...request, explain: true }),
  });
}

describe('the scheduler API answer schemas', () => {
  let replica: SchedulerReplica;
  let runtime: RuntimeNode;

  before(async () => {
    [replica] = (await startReplicas(1)) as [SchedulerReplica];
    runtime = await startRuntime('rt-1', replica.url);
    await until(
      // Available, not only listed: the runtime is listed as it connects, placeable once its state says so.
      'epoch listing rt-1 as available',
      async () => {
        const { body } = await answerOf(`${replica.url}/api/runtimes`);
        const listed = (body as { runtimes: Array<{ id: string; available: boolean }> }).runtimes;
        return listed.some((r) => r.id === 'rt-1' && r.available) ? body : undefined;
      },
      30_000,
    );
  });
  after(async () => {
    await runtime?.close();
    await replica?.close();
  });

  it('parse /api/epoch and /api/runtimes as a replica answers them, every field kept', async () => {
    const epoch = await answerOf(`${replica.url}/api/epoch`);
    assert.equal(epoch.status, 200);
    assert.deepEqual(parseWith(epochInfoSchema, epoch.body), { ok: true, value: epoch.body });
    const runtimes = await answerOf(`${replica.url}/api/runtimes`);
    assert.deepEqual(parseWith(runtimesAnswerSchema, runtimes.body), { ok: true, value: runtimes.body });
    const { epoch: number, runtimes: table } = runtimes.body as { epoch: number; runtimes: unknown[] };
    assert.deepEqual(parseWith(runtimesTableSchema, runtimes.body), {
      ok: true,
      value: { epoch: number, runtimes: table },
    });
    assert.equal(table.length, 1);
  });

  it('parse /api/schedule as a replica answers it: placed, unschedulable and refused', async () => {
    const placed = await explain(replica.url, { class: 'demo', processId: 'p1' });
    assert.equal(placed.status, 200);
    assert.deepEqual(parseWith(scheduleResponseSchema, placed.body), { ok: true, value: placed.body });
    const unschedulable = await explain(replica.url, { class: 'nowhere', processId: 'p1' });
    assert.equal(unschedulable.status, 503);
    assert.deepEqual(parseWith(scheduleResponseSchema, unschedulable.body), { ok: true, value: unschedulable.body });
    const refused = await explain(replica.url, { class: 'demo', processId: 'not valid' });
    assert.equal(refused.status, 400);
    assert.deepEqual(parseWith(apiErrorSchema, refused.body), { ok: true, value: refused.body });
  });

  it('refuse an answer of another shape, naming the path that is wrong', async () => {
    const { body } = await answerOf(`${replica.url}/api/runtimes`);
    const answer = body as { runtimes: Array<Record<string, unknown>> };
    const wrongOwner = { ...answer, runtimes: [{ ...answer.runtimes[0], owner: 7 }] };
    assert.deepEqual(parseWith(runtimesAnswerSchema, wrongOwner, 1), {
      ok: false,
      error: 'runtimes[0].owner: Invalid input: expected string, received number',
    });
    const noCounts = { ...answer, counts: null };
    assert.deepEqual(parseWith(epochInfoSchema, noCounts, 1), {
      ok: false,
      error: 'counts: Invalid input: expected object, received null',
    });
    const placed = (await explain(replica.url, { class: 'demo', processId: 'p1' })).body as Record<string, unknown>;
    const badCandidates = { ...placed, trace: [{ stage: 'Class', before: 1, after: 1, candidates: 'rt-1' }] };
    const refused = parseWith(scheduleResponseSchema, badCandidates, 1);
    assert.equal(refused.ok, false);
    assert.match(refused.ok ? '' : refused.error, /^trace\[0\]\.candidates: /);
  });
});
