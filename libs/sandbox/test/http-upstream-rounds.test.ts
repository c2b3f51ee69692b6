// An http-engine upstream that asks for input mid-call reaches a 2026-07-28 client in rounds, as a stdio
// one does: the upstream here is another host's stdio sandbox, reached over its legacy /mcp session.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { SandboxHost } from '@switchyard/sandbox';
import { askingClass } from './fixtures/asking.ts';
import { childPids } from './fixtures/children.ts';
import { serveHttp1, type Served, testHost } from './fixtures/harness.ts';

describe('an http upstream asking a 2026-07-28 client for input', () => {
  let upstream: SandboxHost;
  let upstreamServed: Served;
  let host: SandboxHost;
  let served: Served;

  before(async () => {
    upstream = testHost({
      runtimeId: 'rt-http-upstream',
      classes: { asking: askingClass() },
    });
    upstreamServed = await serveHttp1(upstream);
    host = testHost({
      runtimeId: 'rt-http-proxy',
      classes: {
        remote: {
          engine: 'http',
          url: new URL('/mcp', upstreamServed.url).href,
          headers: { 'x-switchyard-class': 'asking', 'x-switchyard-process': 'up-asking' },
        },
      },
    });
    served = await serveHttp1(host);
  });
  after(async () => {
    await served.close();
    await host.close();
    await upstreamServed.close();
    await upstream.close();
    assert.deepEqual(childPids(), [], 'close() leaves no child behind');
  });

  it('the call takes its input in rounds and gets the answer it made', async () => {
    const client = new Client(
      { name: 'http-rounds', version: '1.0.0' },
      { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    client.setRequestHandler('elicitation/create', () => ({ action: 'accept', content: { go: true } }));
    const headers = { 'x-switchyard-class': 'remote', 'x-switchyard-process': 'asks-over-http' };
    await client.connect(new StreamableHTTPClientTransport(new URL('/mcp', served.url), { requestInit: { headers } }));
    try {
      const result = (await client.callTool({ name: 'confirm', arguments: { what: 'remote' } })) as {
        content: Array<{ text?: string }>;
      };
      assert.equal(result.content[0]?.text, 'remote: accept go');
    } finally {
      await client.close();
    }
  });
});
