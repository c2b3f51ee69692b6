// A proxied server that withdraws its request for input (notifications/cancelled for its elicitation or
// sampling) has it withdrawn from the client too: a legacy client's request is cancelled, and a 2026-07-28
// call's next round no longer names it. Real SDK clients, a real stdio child (an SDK server that asks to
// start, asks again and withdraws that ask, then asks to finish).
import assert from 'node:assert/strict';
import { after, afterEach, before, describe, it } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { SandboxHost } from '@switchyard/sandbox';
import { childPids } from './fixtures/children.ts';
import { serveHttp1, type Served, testHost } from './fixtures/harness.ts';

const asking = new URL('./fixtures/asking-stdio-server.ts', import.meta.url).pathname;
/** Rounds a client retries, answering nothing, until the upstream's next request shows. */
const ROUNDS_MAX = 100;

type Round = {
  resultType?: string;
  inputRequests?: Record<string, { method: string; params?: { message?: string } }>;
  requestState?: string;
  content?: Array<{ type: string; text?: string }>;
};

const textOf = (result: unknown): string => ((result as Round).content ?? []).map((c) => c.text ?? '').join('');
const messages = (round: Round): string[] =>
  Object.values(round.inputRequests ?? {}).map((r) => r.params?.message ?? '?');

async function waitFor(what: string, check: () => boolean): Promise<void> {
  const deadline = performance.now() + 10_000;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('a proxied server withdrawing its request for input', () => {
  const open: Client[] = [];
  let host: SandboxHost;
  let served: Served;

  before(async () => {
    host = testHost({
      runtimeId: 'rt-withdrawn',
      classes: { asking: { engine: 'stdio', command: process.execPath, args: [asking] } },
    });
    served = await serveHttp1(host);
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((c) => c.close().catch(() => undefined)));
  });
  after(async () => {
    await served.close();
    await host.close();
    assert.deepEqual(childPids(), [], 'close() leaves no child behind');
  });

  async function client(process: string, opts: ConstructorParameters<typeof Client>[1]): Promise<Client> {
    const c = new Client({ name: `withdrawn-${process}`, version: '1.0.0' }, opts);
    const headers = { 'x-switchyard-class': 'asking', 'x-switchyard-process': process };
    await c.connect(new StreamableHTTPClientTransport(new URL('/mcp', served.url), { requestInit: { headers } }));
    open.push(c);
    return c;
  }

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
    const modern = await client('modern', {
      capabilities: { elicitation: { form: {} } },
      versionNegotiation: { mode: { pin: '2026-07-28' } },
      inputRequired: { autoFulfill: false },
    });
    const call = (retry: Record<string, unknown> = {}) =>
      modern.request(
        { method: 'tools/call', params: { name: 'withdraw', arguments: { what: 'm' }, ...retry } },
        { allowInputRequired: true, timeout: 10_000 },
      ) as Promise<Round>;
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
