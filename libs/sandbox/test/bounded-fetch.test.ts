import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { boundedFetch } from '../src/bounded-fetch.ts';

/** A fetch answering with `chunks` as an SSE body, whatever is asked. */
function sseFetch(chunks: readonly string[]): typeof fetch {
  return async () => {
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const c of chunks) controller.enqueue(new TextEncoder().encode(c));
        controller.close();
      },
    });
    return new Response(body, { headers: { 'content-type': 'text/event-stream' } });
  };
}

async function through(chunks: readonly string[], bytesMax: number, body?: string): Promise<[string, number]> {
  let cuts = 0;
  const bounded = boundedFetch(sseFetch(chunks), bytesMax, () => void cuts++);
  const response = await bounded('http://127.0.0.1:1/mcp', { method: 'POST', ...(body && { body }) });
  return [await response.text(), cuts];
}

const big = 'x'.repeat(40);
const request = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: {} });
const error7 = `event: message\ndata: {"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"the upstream's answer is larger than 32 bytes: cut"}}\n\n`;

describe('bounded fetch: SSE events', () => {
  const cases: { name: string; chunks: string[]; out: string; cuts: number; body?: string }[] = [
    {
      name: 'events within the bound pass whole, whatever their line endings and chunks',
      chunks: ['data: a\n', '\ndata: b\r', '\n\r\ndata: c\r\rdata', ': d\n\n'],
      out: 'data: a\n\ndata: b\r\n\r\ndata: c\r\rdata: d\n\n',
      cuts: 0,
    },
    {
      name: 'an event past the bound ends the stream after its id, answering the POSTed request',
      chunks: ['data: a\n\nid: e2\ndata: ', big, '\n\ndata: never\n\n'],
      out: `data: a\n\nid: e2\ndata:\n\n${error7}`,
      cuts: 1,
      body: request,
    },
    {
      name: 'an event past the bound in one chunk is cut too, and one without an id ends the stream bare',
      chunks: [`data: a\n\ndata: ${big}\n\ndata: never\n\n`],
      out: 'data: a\n\n',
      cuts: 1,
    },
    {
      name: 'an event at the bound passes (a blank line ends it: the bound counts its terminators)',
      chunks: [`data: ${'y'.repeat(24)}\n\n`],
      out: `data: ${'y'.repeat(24)}\n\n`,
      cuts: 0,
    },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      assert.deepEqual(await through(c.chunks, 32, c.body), [c.out, c.cuts]);
    });
  }
});

describe('bounded fetch: other bodies', () => {
  const jsonFetch =
    (text: string, headers: Record<string, string> = {}): typeof fetch =>
    async () =>
      new Response(text, { headers: { 'content-type': 'application/json', ...headers } });

  it('a body within the bound passes as it is', async () => {
    const bounded = boundedFetch(jsonFetch('{"ok":true}'), 32, () => assert.fail('cut'));
    assert.deepEqual(await (await bounded('http://127.0.0.1:1/')).json(), { ok: true });
  });

  it('a body past the bound errors with a clear message', async () => {
    let cuts = 0;
    const bounded = boundedFetch(jsonFetch(`"${big}"`), 32, () => void cuts++);
    await assert.rejects((await bounded('http://127.0.0.1:1/')).json(), /larger than 32 bytes/);
    assert.equal(cuts, 1);
  });

  it('a body whose Content-Length is past the bound errors before any of it is read', async () => {
    let cuts = 0;
    const bounded = boundedFetch(jsonFetch('{}', { 'content-length': '33' }), 32, () => void cuts++);
    await assert.rejects((await bounded('http://127.0.0.1:1/')).text(), /larger than 32 bytes/);
    assert.equal(cuts, 1);
  });
});
