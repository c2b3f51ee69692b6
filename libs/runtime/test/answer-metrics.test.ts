// An upstream answer the http engine cuts for its size (past 10 MiB) is
// counted on the runtime's /metrics by class. A real upstream MCP server
// over HTTP behind a real node, scraped over its direct listener.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startRuntimeNode, type RuntimeNode } from '../src/index.ts';
import { LEGACY, nodeOptions, rpc, scrape } from './support.ts';

/** More than the runtime takes in one upstream answer (10 MiB). */
const HUGE_BYTES = 11 * 1024 * 1024;

/** An upstream MCP server (JSON answers) whose one tool, `huge`, answers with HUGE_BYTES of text. */
function hugeUpstream(): http.Server {
  return http.createServer((req, res) => {
    if (req.method !== 'POST') return void res.writeHead(req.method === 'DELETE' ? 200 : 405).end();
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      const msg = JSON.parse(body) as { id?: number; method: string; params?: { protocolVersion?: string } };
      if (msg.id === undefined) return void res.writeHead(202).end();
      const answer = (result: unknown, headers: http.OutgoingHttpHeaders = {}) => {
        res.writeHead(200, { 'content-type': 'application/json', ...headers });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result }));
      };
      if (msg.method === 'initialize') {
        const info = { name: 'huge', version: '1' };
        const result = { protocolVersion: msg.params?.protocolVersion, capabilities: { tools: {} }, serverInfo: info };
        return answer(result, { 'mcp-session-id': 'huge-1' });
      }
      if (msg.method === 'tools/list') return answer({ tools: [{ name: 'huge', inputSchema: { type: 'object' } }] });
      answer({ content: [{ type: 'text', text: 'x'.repeat(HUGE_BYTES) }] });
    });
  });
}

describe("a runtime node's upstream answers cut for their size on /metrics", () => {
  let upstream: http.Server;
  let node: RuntimeNode | undefined;

  before(async () => {
    upstream = hugeUpstream().listen(0, '127.0.0.1');
    await once(upstream, 'listening');
  });
  after(async () => {
    await node?.close();
    upstream.closeAllConnections();
    await new Promise((r) => upstream.close(r));
  });

  it('counts each by class, from 0 for every http class', async () => {
    const { port } = upstream.address() as AddressInfo;
    node = await startRuntimeNode(
      await nodeOptions({ huge: { engine: 'http', url: `http://127.0.0.1:${port}/mcp` }, demo: { engine: 'builtin' } }),
    );
    const url = node.directUrl!;
    const series = (cls: string) => `switchyard_runtime_http_answers_cut_total{class="${cls}"}`;
    assert.equal(await scrape(url, series('huge')), 0);
    assert.equal(await scrape(url, series('demo')), undefined, 'no http series for a builtin class');

    const init = await rpc(url, 'huge', {
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'answer-metrics-test', version: '1' } },
    });
    assert.ok(init.session, 'initialize returned no session id');
    const call = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'huge', arguments: {} } };
    const { json } = await rpc(url, 'huge', call, init.session);
    assert.match(json.error?.message ?? '', /larger than 10 MiB/);
    assert.equal(await scrape(url, series('huge')), 1);
  });
});
