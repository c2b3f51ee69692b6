// What a 2026-07-28 call in rounds holds, and for how long: a call abandoned between rounds or whose
// sandbox is destroyed meanwhile leaves no timer and cancels its upstream call, and a refused retry does
// not cost the call the start it is timed from. Real SDK clients, a real stdio child (an SDK server that
// asks mid-call); time on a ManualClock.
import assert from 'node:assert/strict';
import { after, afterEach, before, describe, it } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { ManualClock } from '@switchyard/clock/testing';
import type { SandboxHost } from '@switchyard/sandbox';
import { childPids } from './fixtures/children.ts';
import { serveHttp1, type Served, testHost } from './fixtures/harness.ts';

const asking = new URL('./fixtures/asking-stdio-server.ts', import.meta.url).pathname;
/** The runtime's wait for a client's retry between rounds. */
const ROUND_WAIT_MS = 10 * 60_000;

type Round = {
  resultType?: string;
  inputRequests?: Record<string, { method: string }>;
  requestState?: string;
  content?: Array<{ type: string; text?: string }>;
};

const textOf = (result: unknown): string => ((result as Round).content ?? []).map((c) => c.text ?? '').join('');
const accept = (round: Round) => ({
  [Object.keys(round.inputRequests ?? {})[0]!]: { action: 'accept', content: { go: true } },
});

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = performance.now() + 10_000;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('what a 2026-07-28 call in rounds holds', () => {
  const clock = new ManualClock();
  const calls: string[] = [];
  const open: Client[] = [];
  let host: SandboxHost;
  let served: Served;

  before(async () => {
    host = testHost({
      runtimeId: 'rt-round-bounds',
      clock,
      classes: {
        asking: { engine: 'stdio', command: process.execPath, args: [asking], expireSeconds: 3600 },
        brief: { engine: 'stdio', command: process.execPath, args: [asking], expireSeconds: 5 },
      },
      onToolCall: (cls, outcome, seconds) => calls.push(`${cls} ${outcome} ${seconds}`),
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

  async function manualClient(className: string, process: string): Promise<Client> {
    const client = new Client(
      { name: `bounds-${process}`, version: '1.0.0' },
      {
        capabilities: { elicitation: { form: {} } },
        versionNegotiation: { mode: { pin: '2026-07-28' } },
        inputRequired: { autoFulfill: false },
      },
    );
    const headers = { 'x-switchyard-class': className, 'x-switchyard-process': process };
    await client.connect(new StreamableHTTPClientTransport(new URL('/mcp', served.url), { requestInit: { headers } }));
    open.push(client);
    return client;
  }

  const confirm = (client: Client, what: string, retry: Record<string, unknown> = {}) =>
    client.request(
      { method: 'tools/call', params: { name: 'confirm', arguments: { what }, ...retry } },
      { allowInputRequired: true, timeout: 10_000 },
    ) as Promise<Round>;

  const outcomes = (client: Client, count: number) =>
    waitFor(`${count} outcomes`, async () => {
      const seen = JSON.parse(textOf(await client.callTool({ name: 'outcomes', arguments: {} }))) as string[];
      return seen.length >= count ? seen : undefined;
    });

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
    await waitFor('the sandbox destroyed', async () => (host.stats().sandboxesByClass.brief === 0 ? true : undefined));
    assert.ok(clock.pendingTimers <= timersBefore, 'neither the wait between rounds nor the expiry is left');
    await assert.rejects(
      confirm(client, 'doomed', { requestState: paused.requestState, inputResponses: accept(paused) }),
      /Invalid or expired requestState/,
    );
  });
});
