// How the runtime shapes MCP answers on the wire, checked on real HTTP/1.1
// and HTTP/2 servers on loopback (the HTTP/2 one with the tunnel's response
// class, as the runtime serves): a POST answer that ends in the turn it
// starts in goes out whole with its length declared (proxies finish it at
// its last byte); one still open at the turn's end streams as written.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, describe, it } from 'node:test';
import type { AnyResponse } from '@switchyard/agent';
import { LengthDeclaringResponse } from '@switchyard/tunnel';
import { wholeWhenQuick } from '../src/answers.ts';

type Answer = (res: AnyResponse) => Promise<void>;

const SSE = { 'content-type': 'text/event-stream' };
const EVENT = 'event: message\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\n\n';

/** Answers within one turn: head, one event and the end in a row of microtasks, as the MCP handler does. */
const quick: Answer = async (res) => {
  const out = res as http.ServerResponse;
  out.writeHead(200, SSE);
  await Promise.resolve();
  out.write(EVENT);
  await Promise.resolve();
  out.end();
};

/** Writes one event, then a second one after a pause: a long tool call streaming progress. */
const slow: Answer = async (res) => {
  const out = res as http.ServerResponse;
  out.writeHead(200, SSE);
  out.write('event: message\ndata: progress\n\n');
  await sleep(300);
  out.write(EVENT);
  out.end();
};

interface Seen {
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
  /** Body received before the answer's second event was written (slow answers), or all of it. */
  readonly firstMs: number;
}

const closers: Array<() => Promise<void>> = [];
after(async () => {
  for (const close of closers) await close();
});

async function viaHttp1(answer: Answer): Promise<Seen> {
  const server = http.createServer((_req, res) => void answer(wholeWhenQuick(res)));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  closers.push(() => new Promise((r) => server.close(() => r())));
  const started = performance.now();
  const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, { method: 'POST' });
  const reader = res.body!.getReader();
  const first = await reader.read();
  const firstMs = performance.now() - started;
  let body = Buffer.from(first.value ?? []).toString();
  for (let next = await reader.read(); !next.done; next = await reader.read())
    body += Buffer.from(next.value).toString();
  return { headers: Object.fromEntries(res.headers), body, firstMs };
}

async function viaHttp2(answer: Answer): Promise<Seen> {
  // The runtime's tunnel serves with this response class (see dialTunnel).
  const server = http2.createServer(
    { Http2ServerResponse: LengthDeclaringResponse },
    (_req, res) => void answer(wholeWhenQuick(res)),
  );
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const session = http2.connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  closers.push(async () => {
    session.close();
    await new Promise((r) => server.close(() => r(undefined)));
  });
  const started = performance.now();
  const stream = session.request({ ':method': 'POST', ':path': '/mcp' });
  stream.end();
  const [headers] = (await once(stream, 'response')) as [http2.IncomingHttpHeaders];
  let body = '';
  let firstMs = 0;
  for await (const chunk of stream) {
    if (body === '') firstMs = performance.now() - started;
    body += String(chunk);
  }
  return { headers: { ...headers }, body, firstMs };
}

const transports = [
  { name: 'HTTP/1.1', send: viaHttp1 },
  { name: 'HTTP/2', send: viaHttp2 },
];

describe('POST answers', () => {
  for (const t of transports) {
    it(`over ${t.name}, an answer that ends in its first turn goes out whole with its length`, async () => {
      const seen = await t.send(quick);
      assert.equal(seen.body, EVENT);
      assert.equal(seen.headers['content-length'], String(Buffer.byteLength(EVENT)));
      assert.equal(seen.headers['content-type'], 'text/event-stream');
      assert.equal(seen.headers['transfer-encoding'], undefined);
    });

    it(`over ${t.name}, an answer still open after its first turn streams what it wrote, without a length`, async () => {
      const seen = await t.send(slow);
      assert.equal(seen.body, `event: message\ndata: progress\n\n${EVENT}`);
      assert.equal(seen.headers['content-length'], undefined);
      assert.ok(seen.firstMs < 250, `first event after ${seen.firstMs.toFixed(0)} ms: held back until the end`);
    });
  }
});
