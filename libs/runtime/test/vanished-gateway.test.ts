// A gateway in direct mode whose host vanishes (powered off, partitioned: no
// FIN, no RST) while a tool call streams its answer to it over the direct
// listener (HTTP/1.1). HTTP/1.1 has no ping; once the kernel's buffers are
// full the runtime's writes wait for acknowledgements that never come, and
// TCP keepalive does not probe meanwhile: only the kernel's retransmission
// timeout (about 15 minutes) would end the connection. The listener closes
// a connection whose writes have waited writeStallTimeoutMs with no byte
// taken. The gateway reaches the listener through a TCP relay that can stop
// carrying bytes both ways without closing.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { McpServer } from '@modelcontextprotocol/server';
import type { Engine, SandboxInstance } from '@switchyard/sandbox';
import { freezableRelay } from '@switchyard/service/testing';
import { startRuntimeNode, type RuntimeNode } from '../src/index.ts';
import { LEGACY, TOKEN, nodeOptions, rpc, scrape } from './support.ts';

/** Short, for a test in real time; far above what a loopback reader that is there takes to make room. */
const WRITE_STALL_TIMEOUT_MS = 1000;
/** What one `flood` call sends at most: well past what loopback's buffers hold. */
const FLOOD_BYTES = 32 * 1024 * 1024;
const NOTE = 'x'.repeat(1000);

/** An engine whose sandboxes expose `flood`: progress notifications, as fast as the loop turns, until cancelled. */
const floodEngine: Engine = {
  async create(): Promise<SandboxInstance> {
    return {
      capabilities: { tools: {} },
      dead: false,
      onDead() {},
      bind() {},
      register(server: McpServer) {
        const registered = server.registerTool('flood', { description: 'fixture' }, async (ctx) => {
          const progressToken = ctx.mcpReq._meta?.progressToken ?? 0;
          for (let sent = 0, progress = 0; sent < FLOOD_BYTES && !ctx.mcpReq.signal.aborted; sent += NOTE.length) {
            await ctx.mcpReq.notify({
              method: 'notifications/progress',
              params: { progressToken, progress: ++progress, message: NOTE },
            });
            await new Promise((resolve) => setImmediate(resolve));
          }
          return { content: [{ type: 'text' as const, text: 'flooded' }] };
        });
        return () => registered.remove();
      },
      async destroy() {},
    };
  },
};

describe('a gateway that vanishes while a direct listener streams to it over HTTP/1.1', () => {
  let node: RuntimeNode;

  before(async () => {
    const options = await nodeOptions({ flood: { engine: 'custom', name: 'flood' } }, { flood: floodEngine });
    node = await startRuntimeNode({
      ...options,
      direct: { ...options.direct!, writeStallTimeoutMs: WRITE_STALL_TIMEOUT_MS },
    });
  });
  after(() => node?.close());

  it('has its connection closed once the writes wait writeStallTimeoutMs, and counted', async () => {
    const url = node.directUrl!;
    const init = await rpc(url, 'flood', {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'vanish-test', version: '1' } },
    });
    await rpc(url, 'flood', { jsonrpc: '2.0', method: 'notifications/initialized' }, init.session, 202);
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: { name: 'flood', arguments: {}, _meta: { progressToken: 'p' } },
    });
    const stalled = async (): Promise<number> =>
      (await scrape(url, 'switchyard_runtime_connections_write_stalled_total')) ?? 0;
    assert.equal(await stalled(), 0);
    const connections = async (): Promise<number | undefined> => scrape(url, 'switchyard_runtime_connections_open');
    const idle = await connections();

    const relay = await freezableRelay(Number(new URL(url).port));
    const gateway = net.connect(relay.port, '127.0.0.1');
    gateway.on('error', () => {});
    try {
      let received = 0;
      gateway.on('data', (chunk: Buffer) => (received += chunk.length));
      gateway.write(
        [
          'POST /mcp HTTP/1.1',
          'Host: 127.0.0.1',
          `Authorization: Bearer ${TOKEN}`,
          'Content-Type: application/json',
          'Accept: application/json, text/event-stream',
          `Mcp-Protocol-Version: ${LEGACY}`,
          `Mcp-Session-Id: ${init.session}`,
          'X-Switchyard-Class: flood',
          `Content-Length: ${Buffer.byteLength(body)}`,
          '',
          body,
        ].join('\r\n'),
      );
      await until(() => received > 1024 * 1024, 'the answer to stream');
      assert.equal(await connections(), idle! + 1, "the gateway's connection is the listener's");

      relay.freeze();
      const frozenAt = performance.now();
      await until(async () => (await connections()) === idle, 'the frozen connection to be closed', 15_000);
      const tookMs = performance.now() - frozenAt;
      assert.ok(tookMs < 10_000, `closed ${tookMs} ms after the freeze (bound ${WRITE_STALL_TIMEOUT_MS} ms)`);
      assert.equal(await stalled(), 1, 'counted');
    } finally {
      gateway.destroy();
      relay.close();
    }
  });
});

/** Waits in real time, polling, until `check` holds; fails after `timeoutMs`. */
async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    assert.ok(performance.now() < deadline, `timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
