// What a 2026-07-28 call in rounds holds, and for how long: a call abandoned between rounds or whose
// sandbox is destroyed meanwhile leaves no timer and cancels its upstream call, and a refused retry does
// not cost the call the start it is timed from. Real SDK clients, a real stdio child (an SDK server that
// asks mid-call); time on a ManualClock.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/client';
import { ManualClock } from '@switchyard/clock/testing';
import { askingClass, callRound, outcomes, type Round, roundByRound, textOf } from './fixtures/asking.ts';
import { hostSuite } from './fixtures/suite.ts';
import { waitFor } from './fixtures/wait.ts';

/** The runtime's wait for a client's retry between rounds. */
const ROUND_WAIT_MS = 10 * 60_000;

const accept = (round: Round) => ({
  [Object.keys(round.inputRequests ?? {})[0]!]: { action: 'accept', content: { go: true } },
});

describe('what a 2026-07-28 call in rounds holds', () => {
  const clock = new ManualClock();
  const calls: string[] = [];
  const suite = hostSuite({
    runtimeId: 'rt-round-bounds',
    clock,
    classes: { asking: askingClass({ expireSeconds: 3600 }), brief: askingClass({ expireSeconds: 5 }) },
    onToolCall: (cls, outcome, seconds) => calls.push(`${cls} ${outcome} ${seconds}`),
  });

  async function manualClient(className: string, process: string): Promise<Client> {
    const client = new Client(
      { name: `bounds-${process}`, version: '1.0.0' },
      roundByRound({ elicitation: { form: {} } }),
    );
    return suite.connect(client, { 'x-switchyard-class': className, 'x-switchyard-process': process });
  }

  const confirm = (client: Client, what: string, retry: Record<string, unknown> = {}) =>
    callRound(client, 'confirm', { what }, retry);

  it('a retry refused for other arguments leaves the call timed from its first round', async () => {
    const client = await manualClient('asking', 'timed');
    const paused = await confirm(client, 'first');
    await clock.advance(5000);
    calls.length = 0;
    await assert.rejects(
      confirm(client, 'other', { requestState: paused.requestState, inputResponses: accept(paused) }),
    );
    await clock.advance(5000);
    const done = await confirm(client, 'first', { requestState: paused.requestState, inputResponses: accept(paused) });
    assert.equal(textOf(done), 'first: accept go');
    // The refused retry is counted too (an error, timed from the call's start, as any refused retry is).
    assert.deepEqual(calls, ['asking error 5', 'asking ok 10']);
  });

  it('a call abandoned between rounds leaves no timer behind', async () => {
    const client = await manualClient('asking', 'abandoned');
    const before = clock.pendingTimers;
    const paused = await confirm(client, 'gone');
    assert.equal(paused.resultType, 'input_required');
    assert.equal(clock.pendingTimers, before + 1, 'the wait between rounds is the one timer the call adds');
    await clock.advance(ROUND_WAIT_MS);
    const seen = (await outcomes(client, 2)).sort();
    assert.equal(seen[0], 'gone: cancelled');
    assert.match(seen[1]!, /^gone: refused: .*did not retry within 600 s/);
    assert.equal(clock.pendingTimers, before);
  });

  it('a sandbox destroyed while a call waits between rounds refuses its retry and leaves no timer', async () => {
    const client = await manualClient('brief', 'destroyed');
    const timersBefore = clock.pendingTimers;
    const paused = await confirm(client, 'doomed');
    assert.equal(paused.resultType, 'input_required');
    await clock.advance(5000);
    await waitFor('the sandbox destroyed', () => suite.host.stats().sandboxesByClass.brief === 0);
    assert.ok(clock.pendingTimers <= timersBefore, 'neither the wait between rounds nor the expiry is left');
    await assert.rejects(
      confirm(client, 'doomed', { requestState: paused.requestState, inputResponses: accept(paused) }),
      /Invalid or expired requestState/,
    );
  });
});
