import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { within } from '@switchyard/clock/testing';
import type { SandboxHost } from '@switchyard/sandbox';
import { connect } from './fixtures/clients.ts';
import { captureLogger, serveHttp1, testHost, type Served } from './fixtures/harness.ts';

/** More than the runtime takes in one upstream message (10 MiB). */
const HUGE_BYTES = 11 * 1024 * 1024;

/**
 * A remote MCP server that misbehaves on request: the tool `json` is answered
 * with a JSON body of HUGE_BYTES, `sse` with an SSE stream whose first event
 * (a log message) is that large and which then stays open without an answer,
 * and a standalone GET stream opened afresh carries one such event. It
 * records the POST streams that closed before it ended them and the events
 * after which GET streams resumed (Last-Event-ID).
 */
function hugeUpstream() {
  const seen = { postStreamsClosed: 0, getsResumedAfter: [] as string[] };
  let sessions = 0;
  const server = http.createServer((req, res) => {
    if (req.method === 'DELETE') return void res.writeHead(200).end();
    if (req.method === 'GET') {
      const resumedAfter = req.headers['last-event-id'] as string | undefined;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      if (resumedAfter === undefined) res.write(`id: g1\nevent: message\ndata: ${logMessage()}\n\n`);
      else seen.getsResumedAfter.push(resumedAfter);
      return;
    }
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      const msg = JSON.parse(body) as { id?: number; method: string; params?: Record<string, unknown> };
      const answer = (result: unknown, headers: http.OutgoingHttpHeaders = {}) => {
        res.writeHead(200, { 'content-type': 'application/json', ...headers });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result }));
      };
      if (msg.id === undefined) return void res.writeHead(202).end();
      if (msg.method === 'initialize') {
        const capabilities = { tools: {}, logging: {} };
        const result = {
          protocolVersion: msg.params?.protocolVersion,
          capabilities,
          serverInfo: { name: 'huge', version: '1' },
        };
        return answer(result, { 'mcp-session-id': `huge-${++sessions}` });
      }
      if (msg.method === 'tools/list') {
        return answer({ tools: ['json', 'sse', 'small'].map((name) => ({ name, inputSchema: { type: 'object' } })) });
      }
      const tool = (msg.params as { name?: string } | undefined)?.name;
      if (tool === 'json') return answer({ content: [{ type: 'text', text: 'x'.repeat(HUGE_BYTES) }] });
      if (tool === 'sse') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(`id: p1\nevent: message\ndata: ${logMessage()}\n\n`);
        res.on('close', () => seen.postStreamsClosed++);
        return;
      }
      answer({ content: [{ type: 'text', text: 'small' }] });
    });
  });
  return { server, seen };
}

function logMessage(): string {
  return JSON.stringify({
    jsonrpc: '2.0',
    method: 'notifications/message',
    params: { level: 'info', data: 'x'.repeat(HUGE_BYTES) },
  });
}

async function waitFor(what: string, check: () => boolean, timeoutMs = 15_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('http engine: upstream answers beyond the bound', () => {
  const upstream = hugeUpstream();
  const logger = captureLogger();
  let host: SandboxHost;
  let served: Served;

  before(async () => {
    upstream.server.listen(0, '127.0.0.1');
    await once(upstream.server, 'listening');
    const { port } = upstream.server.address() as AddressInfo;
    host = testHost({
      runtimeId: 'rt-huge',
      classes: { huge: { engine: 'http', url: `http://127.0.0.1:${port}/mcp` } },
      logger,
    });
    served = await serveHttp1(host);
  });
  after(async () => {
    await served.close();
    await host.close();
    upstream.server.closeAllConnections();
    await new Promise((r) => upstream.server.close(r));
  });

  const cuts = (kind: string) =>
    logger.lines.filter((l) => l.obj.event === 'sandbox.answer_too_large' && l.obj.kind === kind);

  it('a JSON answer past the bound fails the call with a clear error, is logged, and the sandbox serves on', async () => {
    const client = await connect('v2-legacy', served.url, served.fetch, { 'x-switchyard-class': 'huge' });
    try {
      await assert.rejects(client.callText('json'), /answer is larger than 10 MiB/);
      assert.equal(cuts('json').length, 1);
      assert.deepEqual(cuts('json')[0]!.obj, {
        event: 'sandbox.answer_too_large',
        class: 'huge',
        kind: 'json',
        bytesMax: 10 * 1024 * 1024,
      });
      assert.equal(await client.callText('small'), 'small');
    } finally {
      await client.close();
    }
  });

  it('an SSE answer with an event past the bound is ended, and its call fails with a clear error', async () => {
    const client = await connect('v2-legacy', served.url, served.fetch, { 'x-switchyard-class': 'huge' });
    try {
      await within(
        assert.rejects(client.callText('sse'), /answer is larger than 10 MiB/),
        20_000,
        'the call was not answered',
      );
      await waitFor('the upstream to see its stream ended', () => upstream.seen.postStreamsClosed === 1);
      assert.equal(cuts('event').length > 0, true);
      assert.equal(await client.callText('small'), 'small');
    } finally {
      await client.close();
    }
  });

  it('a standalone GET stream with an event past the bound is ended, and resumed after that event', async () => {
    const client = await connect('v2-legacy', served.url, served.fetch, {
      'x-switchyard-class': 'huge',
      'x-switchyard-process': 'huge-get',
    });
    try {
      // The sandbox's upstream session opened its GET stream, whose first event is the huge one.
      await waitFor('the GET stream to be resumed after it', () => upstream.seen.getsResumedAfter.includes('g1'));
      assert.equal(await client.callText('small'), 'small');
    } finally {
      await client.close();
    }
  });
});
