// A proxied server that withdraws its request for input (notifications/cancelled for its elicitation or
// sampling) has it withdrawn from the client too: a legacy client's request is cancelled, and a 2026-07-28
// call's next round no longer names it. Real SDK clients, a real stdio child (an SDK server that asks to
// start, asks again and withdraws that ask, then asks to finish).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/client';
import { askingClass, callRound, type Round, roundByRound, textOf } from './fixtures/asking.ts';
import { hostSuite } from './fixtures/suite.ts';
import { waitFor } from './fixtures/wait.ts';

/** Rounds a client retries, answering nothing, until the upstream's next request shows. */
const ROUNDS_MAX = 100;

const messages = (round: Round): string[] =>
  Object.values(round.inputRequests ?? {}).map((r) => r.params?.message ?? '?');

describe('a proxied server withdrawing its request for input', () => {
  const suite = hostSuite({ runtimeId: 'rt-withdrawn', classes: { asking: askingClass() } });

  const client = (process: string, opts: ConstructorParameters<typeof Client>[1]): Promise<Client> =>
    suite.connect(new Client({ name: `withdrawn-${process}`, version: '1.0.0' }, opts), {
      'x-switchyard-class': 'asking',
      'x-switchyard-process': process,
    });

  it('a legacy client has the withdrawn request cancelled', async () => {
    const legacy = await client('legacy', { capabilities: { elicitation: { form: {} } } });
    const withdrawn: AbortSignal[] = [];
    legacy.setRequestHandler('elicitation/create', async (req, ctx) => {
      if (!req.params.message.startsWith('Really')) return { action: 'accept', content: { go: true } };
      const { signal } = ctx.mcpReq;
      withdrawn.push(signal);
      // Held until withdrawn: a client's user who has not answered yet.
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      return { action: 'cancel' };
    });
    const result = await legacy.callTool({ name: 'withdraw', arguments: { what: 'w' } });
    assert.equal(textOf(result), 'w: accept, withdrawn, accept');
    // Had the runtime not passed the withdrawal on, the client would still hold the request.
    await waitFor('the withdrawn request cancelled at the client', () => withdrawn.every((s) => s.aborted));
  });

  it('a 2026-07-28 call no longer names the withdrawn request in its next round', async () => {
    const modern = await client('modern', roundByRound({ elicitation: { form: {} } }));
    const call = (retry: Record<string, unknown> = {}) => callRound(modern, 'withdraw', { what: 'm' }, retry);
    const accept = (round: Round) =>
      Object.fromEntries(
        Object.keys(round.inputRequests ?? {}).map((k) => [k, { action: 'accept', content: { go: true } }]),
      );
    const start = await call();
    assert.deepEqual(messages(start), ['Start m?']);
    // The retry names the next request the upstream has unanswered, which may be the one it withdraws next.
    let next = await call({ requestState: start.requestState, inputResponses: accept(start) });
    for (let i = 0; i < ROUNDS_MAX && !messages(next).includes('Finish m?'); i++) {
      next = await call({ requestState: next.requestState });
    }
    // The upstream withdrew its second request before it asked to finish.
    assert.deepEqual(messages(next), ['Finish m?']);
    const done = await call({ requestState: next.requestState, inputResponses: accept(next) });
    assert.equal(textOf(done), 'm: accept, withdrawn, accept');
  });
});
