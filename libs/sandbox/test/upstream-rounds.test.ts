// A proxied server's requests for input (elicitation, sampling) reach a 2026-07-28 client as input_required
// rounds: the upstream call stays open in its sandbox between rounds, tied to the requestState the runtime
// issued, and the client's retry answers the server. Real SDK clients, a real stdio child (an SDK server
// that asks mid-call); time between rounds on a ManualClock.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Client, ProtocolErrorCode } from '@modelcontextprotocol/client';
import { ManualClock } from '@switchyard/clock/testing';
import { askingClass, callRound, outcomes, type Round, roundByRound, textOf } from './fixtures/asking.ts';
import { hostSuite } from './fixtures/suite.ts';

/** The runtime's wait for a client's retry between rounds (the bound on a forwarded request). */
const ROUND_WAIT_MS = 10 * 60_000;
/** Calls of one sandbox that may wait between rounds at once. */
const PAUSED_MAX = 32;

describe('a proxied server asking a 2026-07-28 client for input', () => {
  const clock = new ManualClock();
  const calls: string[] = [];
  const suite = hostSuite({
    runtimeId: 'rt-rounds',
    clock,
    // Longer than the wait between rounds: the sandbox outlives every call it abandons.
    classes: { asking: askingClass({ expireSeconds: 3600 }) },
    onToolCall: (cls, outcome, seconds) => calls.push(`${cls} ${outcome} ${seconds}`),
  });

  /** A 2026-07-28 client of sandbox `process`: it answers input requests itself unless `manual`. */
  async function modernClient(process: string, manual = false): Promise<Client> {
    const capabilities = { sampling: {}, elicitation: { form: {} } };
    const options = manual
      ? roundByRound(capabilities)
      : { capabilities, versionNegotiation: { mode: { pin: '2026-07-28' as const } } };
    const client = new Client({ name: `rounds-${process}`, version: '1.0.0' }, options);
    return suite.connect(client, { 'x-switchyard-class': 'asking', 'x-switchyard-process': process });
  }

  /** One round of `confirm {what, times}`, as a client that does not answer for itself sends it. */
  function confirmRound(client: Client, what: string, retry: Record<string, unknown> = {}, times?: number) {
    return callRound(client, 'confirm', { what, ...(times === undefined ? {} : { times }) }, retry);
  }

  it('a client with handlers gets the answer its input made, the call counted once from its first round', async () => {
    const client = await modernClient('answering');
    const asked: string[] = [];
    // Its user takes 5 s on the test's clock to answer.
    client.setRequestHandler('elicitation/create', async (req) => {
      asked.push(req.params.message);
      await clock.advance(5000);
      return { action: 'accept', content: { go: true } };
    });
    client.setRequestHandler('sampling/createMessage', (req) => {
      const first = req.params.messages[0]?.content;
      asked.push(first && 'text' in first ? first.text : '?');
      return { role: 'assistant', content: { type: 'text', text: 'a sampled haiku' }, model: 'test' };
    });
    calls.length = 0;
    assert.equal(
      textOf(await client.callTool({ name: 'confirm', arguments: { what: 'deploy' } })),
      'deploy: accept go',
    );
    assert.deepEqual(calls, ['asking ok 5']);
    assert.equal(
      textOf(await client.callTool({ name: 'sample', arguments: { prompt: 'a haiku' } })),
      'a sampled haiku',
    );
    assert.deepEqual(asked, ['Go ahead with deploy?', 'a haiku']);
  });

  it('a round that ends input_required names the input as the 2026-07-28 embedded request, with a fresh state each round', async () => {
    const client = await modernClient('manual-rounds', true);
    const first = await confirmRound(client, 'rename');
    assert.equal(first.resultType, 'input_required');
    const [[key, request]] = Object.entries(first.inputRequests ?? {}) as [[string, { method: string }]];
    assert.equal(request.method, 'elicitation/create');
    assert.match(first.requestState ?? '', /^[A-Za-z0-9_-]{22,}$/);
    // A retry that answers nothing is asked again, under a new state.
    const again = await confirmRound(client, 'rename', { requestState: first.requestState });
    assert.deepEqual(Object.keys(again.inputRequests ?? {}), [key]);
    assert.notEqual(again.requestState, first.requestState);
    const done = await confirmRound(client, 'rename', {
      requestState: again.requestState,
      inputResponses: { [key]: { action: 'decline' } },
    });
    assert.equal(textOf(done), 'rename: decline');
  });

  it('a client that never retries has its call abandoned after the wait between rounds: the server is refused and cancelled', async () => {
    const client = await modernClient('silent', true);
    const paused = await confirmRound(client, 'drop');
    assert.equal(paused.resultType, 'input_required');
    calls.length = 0;
    await clock.advance(ROUND_WAIT_MS);
    // Either may reach the server first: the refusal is an answer, the cancellation a notification.
    const seen = (await outcomes(client, 2)).sort();
    assert.equal(seen[0], 'drop: cancelled');
    assert.match(seen[1]!, /^drop: refused: .*did not retry within 600 s/);
    await assert.rejects(confirmRound(client, 'drop', { requestState: paused.requestState }), (error: Error) => {
      assert.equal((error as { code?: unknown }).code, ProtocolErrorCode.InvalidParams);
      assert.match(error.message, /Invalid or expired requestState/);
      return true;
    });
    // Counted once, as its last round settles: the retry refused, an error, timed from its first round.
    assert.deepEqual(
      calls.filter((c) => c !== 'asking ok 0'),
      [`asking error ${ROUND_WAIT_MS / 1000}`],
    );
  });

  it(`a sandbox keeps at most ${PAUSED_MAX} calls between rounds: the next one's server is refused its input`, async () => {
    const client = await modernClient('crowded', true);
    // One after the other: an upstream's request names no call, so it goes to the latest (see docs/protocol.md).
    const paused: Round[] = [];
    for (let i = 0; i < PAUSED_MAX; i++) paused.push(await confirmRound(client, `c${i}`));
    assert.ok(paused.every((p) => p.resultType === 'input_required'));
    const refused = await confirmRound(client, 'one-too-many');
    assert.equal(textOf(refused), 'one-too-many: refused');
    const seen = await outcomes(client, 1);
    assert.match(seen[0]!, new RegExp(`^one-too-many: refused: .*${PAUSED_MAX} calls of this sandbox already wait`));
    // The others still wait, each for its own answer.
    const first = paused[0]!;
    const key = Object.keys(first.inputRequests!)[0]!;
    const done = await confirmRound(client, 'c0', {
      requestState: first.requestState,
      inputResponses: { [key]: { action: 'accept', content: { go: false } } },
    });
    assert.equal(textOf(done), 'c0: accept');
  });

  it("a call that had its input is the one a server's next request goes to, not a later call still running", async () => {
    const client = await modernClient('interleaved', true);
    const first = await confirmRound(client, 'twice', {}, 2);
    const held = client.callTool({ name: 'hold', arguments: {} });
    await outcomes(client, 1);
    const accept = (p: Round) => ({
      [Object.keys(p.inputRequests!)[0]!]: { action: 'accept', content: { go: true } },
    });
    const second = await confirmRound(
      client,
      'twice',
      { requestState: first.requestState, inputResponses: accept(first) },
      2,
    );
    assert.equal(second.resultType, 'input_required');
    const done = await confirmRound(
      client,
      'twice',
      { requestState: second.requestState, inputResponses: accept(second) },
      2,
    );
    assert.equal(textOf(done), 'twice: accept go, accept go');
    assert.equal(textOf(await client.callTool({ name: 'release', arguments: {} })), 'released');
    assert.equal(textOf(await held), 'held');
  });

  it('a retry naming a state this sandbox never issued is refused with invalid params', async () => {
    const client = await modernClient('stranger', true);
    await assert.rejects(
      confirmRound(client, 'guess', { requestState: 'AAAAAAAAAAAAAAAAAAAAAA', inputResponses: {} }),
      (error: Error) => {
        assert.equal((error as { code?: unknown }).code, ProtocolErrorCode.InvalidParams);
        assert.match(error.message, /Invalid or expired requestState/);
        return true;
      },
    );
    // Nor does a state of another sandbox reach this one's calls.
    const other = await modernClient('other-sandbox', true);
    const paused = await confirmRound(other, 'mine');
    await assert.rejects(confirmRound(client, 'mine', { requestState: paused.requestState }), /Invalid or expired/);
    const done = await confirmRound(other, 'mine', {
      requestState: paused.requestState,
      inputResponses: { [Object.keys(paused.inputRequests!)[0]!]: { action: 'cancel' } },
    });
    assert.equal(textOf(done), 'mine: cancel');
  });
});
