// The edges of a 2026-07-28 call served in rounds: progress relayed to each round's own request (all of it
// before the round's input_required answer), a later round's cancellation reaching the upstream call, a
// state used by another principal of the same sandbox, a retry that declares fewer capabilities than the
// first round, and what a sandbox destroyed between rounds leaves. Real SDK clients, a real stdio child (an SDK
// server that asks mid-call); time between rounds on a ManualClock.
import assert from 'node:assert/strict';
import { after, afterEach, before, describe, it } from 'node:test';
import { Client, type ClientCapabilities, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { ManualClock } from '@switchyard/clock/testing';
import type { SandboxHost } from '@switchyard/sandbox';
import { childPids } from './fixtures/children.ts';
import { serveHttp1, type Served, testHost } from './fixtures/harness.ts';

const asking = new URL('./fixtures/asking-stdio-server.ts', import.meta.url).pathname;

type Round = {
  resultType?: string;
  inputRequests?: Record<string, { method: string; params?: { message?: string } }>;
  requestState?: string;
  content?: Array<{ type: string; text?: string }>;
};
type Progress = { progress: number; message?: string };

const textOf = (result: unknown): string => ((result as Round).content ?? []).map((c) => c.text ?? '').join('');
const onlyKey = (round: Round): string => Object.keys(round.inputRequests ?? {})[0]!;

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('the edges of a 2026-07-28 call in rounds', () => {
  const clock = new ManualClock();
  const open: Client[] = [];
  let host: SandboxHost;
  let served: Served;

  before(async () => {
    host = testHost({
      runtimeId: 'rt-round-edges',
      clock,
      classes: { asking: { engine: 'stdio', command: process.execPath, args: [asking], expireSeconds: 3600 } },
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

  /** A 2026-07-28 client of sandbox `process` that answers no input itself, as `principal` if named. */
  async function manualClient(
    process: string,
    principal?: string,
    capabilities: ClientCapabilities = { sampling: {}, elicitation: { form: {} } },
  ): Promise<Client> {
    const client = new Client(
      { name: `edges-${process}`, version: '1.0.0' },
      {
        capabilities,
        versionNegotiation: { mode: { pin: '2026-07-28' } },
        inputRequired: { autoFulfill: false },
      },
    );
    const headers: Record<string, string> = { 'x-switchyard-class': 'asking', 'x-switchyard-process': process };
    if (principal) headers['x-switchyard-principal'] = principal;
    await client.connect(new StreamableHTTPClientTransport(new URL('/mcp', served.url), { requestInit: { headers } }));
    open.push(client);
    return client;
  }

  function round(
    client: Client,
    name: string,
    args: Record<string, unknown>,
    retry: Record<string, unknown> = {},
    opts: { onprogress?: (p: Progress) => void; signal?: AbortSignal } = {},
  ): Promise<Round> {
    return client.request(
      { method: 'tools/call', params: { name, arguments: args, ...retry } },
      { allowInputRequired: true, timeout: 10_000, ...opts },
    ) as Promise<Round>;
  }

  async function outcomes(client: Client, count: number): Promise<string[]> {
    return waitFor(`${count} outcomes`, async () => {
      const seen = JSON.parse(textOf(await client.callTool({ name: 'outcomes', arguments: {} }))) as string[];
      return seen.length >= count ? seen : undefined;
    });
  }

  it("has an upstream's request refused at once in a call that names no process, whose sandbox ends with it", async () => {
    const client = new Client(
      { name: 'edges-unnamed', version: '1.0.0' },
      {
        capabilities: { elicitation: { form: {} } },
        versionNegotiation: { mode: { pin: '2026-07-28' } },
        inputRequired: { autoFulfill: false },
      },
    );
    const requestInit = { headers: { 'x-switchyard-class': 'asking' } };
    await client.connect(new StreamableHTTPClientTransport(new URL('/mcp', served.url), { requestInit }));
    open.push(client);
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
