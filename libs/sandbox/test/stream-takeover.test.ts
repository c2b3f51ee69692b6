// A client that opens a legacy session's event stream again, or resumes a
// call's stream with `Last-Event-ID`, has given up on the connection that
// carried it, though the runtime may not know yet: a peer that vanished
// without a FIN or RST (a laptop's network changing, a NAT dropping state)
// holds its stream until TCP gives up, about 15 minutes. The newer request
// takes the stream over and the older one ends: before, it was refused 409
// ("Only one SSE stream", "Stream already has an active connection") and
// the client lost its notifications, or its call's result, until then.
// Here the older connections stay open and unread, as a vanished peer's do.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { SandboxHost } from '@switchyard/sandbox';
import { RecordingReporter, serveHttp1, type Served, testHost } from './fixtures/harness.ts';

const VERSION = '2025-11-25';
const JSON_HEADERS = { 'content-type': 'application/json', 'mcp-protocol-version': VERSION };
const BOTH = 'application/json, text/event-stream';

/** Reads `res`'s body until `until` matches what was read (then leaves the rest) or the body ends. */
async function readUntil(
  res: Response,
  until: RegExp | undefined,
  timeoutMs = 10_000,
): Promise<{ text: string; ended: boolean }> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  const deadline = setTimeout(() => void reader.cancel(new Error('timed out')), timeoutMs);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return { text, ended: true };
      text += decoder.decode(value, { stream: true });
      if (until?.test(text)) return { text, ended: false };
    }
  } finally {
    clearTimeout(deadline);
    reader.releaseLock();
  }
}

describe('a legacy session stream opened again takes the place of the one still held', () => {
  let host: SandboxHost;
  let served: Served;
  const held: AbortController[] = [];

  before(async () => {
    host = testHost({
      runtimeId: 'rt-takeover',
      classes: { demo: { engine: 'builtin' } },
      reporter: new RecordingReporter(),
    });
    served = await serveHttp1(host);
  });
  after(async () => {
    for (const h of held) h.abort();
    await served.close();
    await host.close();
  });

  /** Opens a session; returns the headers of its requests. */
  async function openSession(): Promise<Record<string, string>> {
    const init = await fetch(`${served.url}/mcp`, {
      method: 'POST',
      headers: { ...JSON_HEADERS, accept: BOTH, 'x-switchyard-class': 'demo' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: VERSION, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
      }),
    });
    await init.text();
    const session = { ...JSON_HEADERS, 'mcp-session-id': init.headers.get('mcp-session-id')! };
    const initialized = await fetch(`${served.url}/mcp`, {
      method: 'POST',
      headers: { ...session, accept: BOTH },
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    });
    assert.equal(initialized.status, 202);
    return session;
  }

  /** A request whose connection is left open (and, unless read, unread) until the test ends. */
  function hold(init: RequestInit & { headers: Record<string, string> }): Promise<Response> {
    const abort = new AbortController();
    held.push(abort);
    return fetch(`${served.url}/mcp`, { ...init, signal: abort.signal });
  }

  it('a GET stream opened again is served, and the older one ends', async () => {
    const session = await openSession();
    const first = await hold({ headers: { ...session, accept: 'text/event-stream' } });
    assert.equal(first.status, 200);
    const second = await hold({ headers: { ...session, accept: 'text/event-stream' } });
    assert.equal(second.status, 200, await (second.status === 200 ? '' : second.text()));
    assert.equal((await readUntil(first, undefined)).ended, true, 'the older stream ends');
  });

  it('a GET stream opened again with an empty Last-Event-ID is served too (no event to resume from)', async () => {
    // The SDK reads an empty Last-Event-ID as none and opens the session's stream: it takes over as above.
    const session = await openSession();
    const first = await hold({ headers: { ...session, accept: 'text/event-stream' } });
    assert.equal(first.status, 200);
    const second = await hold({ headers: { ...session, accept: 'text/event-stream', 'last-event-id': '' } });
    assert.equal(second.status, 200, await (second.status === 200 ? '' : second.text()));
    assert.equal((await readUntil(first, undefined)).ended, true, 'the older stream ends');
  });

  it("a call's stream resumed with Last-Event-ID is served with the call's result, and the older one ends", async () => {
    const session = await openSession();
    const call = await hold({
      method: 'POST',
      headers: { ...session, accept: BOTH },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 2,
        method: 'tools/call',
        params: { name: 'sleep', arguments: { ms: 1500 }, _meta: { progressToken: 'p' } },
      }),
    });
    assert.equal(call.status, 200);
    const { text } = await readUntil(call, /^id: (\S+)$/m);
    const lastEventId = /^id: (\S+)$/m.exec(text)![1]!;
    const resumed = await hold({
      headers: { ...session, accept: 'text/event-stream', 'last-event-id': lastEventId },
    });
    assert.equal(resumed.status, 200, await (resumed.status === 200 ? '' : resumed.text()));
    assert.match((await readUntil(resumed, /slept 1500/)).text, /slept 1500/);
    assert.equal((await readUntil(call, undefined)).ended, true, 'the older stream ends');
  });
});
