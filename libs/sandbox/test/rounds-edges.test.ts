// The edges of a 2026-07-28 call served in rounds: progress relayed to each round's own request (all of it
// before the round's input_required answer), a later round's cancellation reaching the upstream call, a
// state used by another principal of the same sandbox, a retry that declares fewer capabilities than the
// first round, and what a sandbox destroyed between rounds leaves. Real SDK clients, a real stdio child (an SDK
// server that asks mid-call); time between rounds on a ManualClock.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Client, type ClientCapabilities } from '@modelcontextprotocol/client';
import { ManualClock } from '@switchyard/clock/testing';
import { askingClass, callRound as round, outcomes, type Round, roundByRound, textOf } from './fixtures/asking.ts';
import { hostSuite } from './fixtures/suite.ts';

type Progress = { progress: number; message?: string };

const onlyKey = (round: Round): string => Object.keys(round.inputRequests ?? {})[0]!;

describe('the edges of a 2026-07-28 call in rounds', () => {
  const clock = new ManualClock();
  const suite = hostSuite({
    runtimeId: 'rt-round-edges',
    clock,
    classes: { asking: askingClass({ expireSeconds: 3600 }) },
  });

  /** A 2026-07-28 client of sandbox `process` that answers no input itself, as `principal` if named. */
  async function manualClient(
    process: string,
    principal?: string,
    capabilities: ClientCapabilities = { sampling: {}, elicitation: { form: {} } },
  ): Promise<Client> {
    const client = new Client({ name: `edges-${process}`, version: '1.0.0' }, roundByRound(capabilities));
    const headers: Record<string, string> = { 'x-switchyard-class': 'asking', 'x-switchyard-process': process };
    if (principal) headers['x-switchyard-principal'] = principal;
    return suite.connect(client, headers);
  }

  it("has an upstream's request refused at once in a call that names no process, whose sandbox ends with it", async () => {
    const client = await suite.connect(
      new Client({ name: 'edges-unnamed', version: '1.0.0' }, roundByRound({ elicitation: { form: {} } })),
      { 'x-switchyard-class': 'asking' },
    );
    const answered = await round(client, 'confirm', { what: 'unnamed' });
    assert.equal(answered.resultType, undefined, 'no input_required: no retry could reach the call');
    assert.equal(textOf(answered), 'unnamed: refused');
  });

  it('progress goes to the request of the round it happens in', async () => {
    const client = await manualClient('progress');
    const first: Progress[] = [];
    const second: Progress[] = [];
    const paused = await round(client, 'steps', { what: 'p' }, {}, { onprogress: (p) => first.push(p) });
    assert.equal(paused.resultType, 'input_required');
    const resumed = round(
      client,
      'steps',
      { what: 'p' },
      {
        requestState: paused.requestState,
        inputResponses: { [onlyKey(paused)]: { action: 'accept', content: { go: true } } },
      },
      { onprogress: (p) => second.push(p) },
    );
    await outcomes(client, 1);
    await client.callTool({ name: 'release', arguments: {} });
    assert.equal(textOf(await resumed), 'p: accept');
    assert.deepEqual(
      first.map((p) => p.message),
      ['p 1'],
    );
    assert.deepEqual(
      second.map((p) => p.message),
      ['p 2'],
    );
  });

  it('progress sent just before the upstream asks reaches the round that ends input_required', async () => {
    const client = await manualClient('burst');
    const seen: number[] = [];
    const paused = await round(
      client,
      'burst',
      { what: 'b', count: 200 },
      {},
      { onprogress: (p) => seen.push(p.progress) },
    );
    assert.equal(paused.resultType, 'input_required');
    assert.equal(seen.length, 200, 'every progress the upstream sent before it asked');
    const done = await round(
      client,
      'burst',
      { what: 'b', count: 200 },
      { requestState: paused.requestState, inputResponses: { [onlyKey(paused)]: { action: 'decline' } } },
    );
    assert.equal(textOf(done), 'b: decline');
  });

  it('a later round its client cancels cancels the upstream call', async () => {
    const client = await manualClient('cancel-later');
    const paused = await round(client, 'steps', { what: 'c' });
    const abort = new AbortController();
    const resumed = round(
      client,
      'steps',
      { what: 'c' },
      {
        requestState: paused.requestState,
        inputResponses: { [onlyKey(paused)]: { action: 'accept', content: { go: true } } },
      },
      { signal: abort.signal },
    );
    await outcomes(client, 1);
    abort.abort(new Error('the user gave up'));
    await assert.rejects(resumed);
    assert.deepEqual(await outcomes(client, 2), ['c: accept', 'c: cancelled']);
  });

  it('a retry that no longer declares what an unanswered request needs has it refused, and the call goes on', async () => {
    const client = await manualClient('fewer-caps');
    const paused = await round(client, 'confirm', { what: 'drop-caps' });
    assert.equal(paused.resultType, 'input_required');
    // The same sandbox, another client: its retry declares sampling only, and answers nothing.
    const lesser = await manualClient('fewer-caps', undefined, { sampling: {} });
    const done = await round(lesser, 'confirm', { what: 'drop-caps' }, { requestState: paused.requestState });
    assert.equal(textOf(done), 'drop-caps: refused');
    const seen = await outcomes(client, 1);
    assert.match(seen[0]!, /^drop-caps: refused: .*Client does not support elicitation/);
  });

  it("another principal of the same sandbox cannot resume a principal's call with its state", async () => {
    const alice = await manualClient('shared', 'alice');
    const mallory = await manualClient('shared', 'mallory');
    const paused = await round(alice, 'confirm', { what: 'transfer' });
    const answer = { [onlyKey(paused)]: { action: 'accept', content: { go: true } } };
    await assert.rejects(
      round(mallory, 'confirm', { what: 'transfer' }, { requestState: paused.requestState, inputResponses: answer }),
      /Invalid or expired requestState/,
    );
    const done = await round(
      alice,
      'confirm',
      { what: 'transfer' },
      { requestState: paused.requestState, inputResponses: answer },
    );
    assert.equal(textOf(done), 'transfer: accept go');
  });
});
