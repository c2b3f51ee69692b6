// A request the gateway accepts under its --header-bytes-max (here 48 KiB,
// past Node's 16 KiB default) reaches the sandbox whole, on every way the
// gateway forwards it: a relay connection, /api/proxy over HTTP/1.1, an
// event stream over HTTP/2 to the scheduler and the tunnel's HTTP/2 beyond
// it, and a runtime's direct listener. No hop refuses it with a bare 431 the
// client would take for an upstream failure: what the hops take is one bound
// (FORWARDED_HEADER_BYTES_MAX), and a gateway whose own limit is higher
// answers 431 itself for a request whose forwarded headers are past it.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { FORWARDED_HEADER_BYTES_MAX } from '@switchyard/protocol';
import { freePort, initializeBody, post, rpcResult, textOf, toolCallBody } from './support.ts';

const HEADER_BYTES_MAX = 48 * 1024;
/** Not a credential: the gateway forwards it as it came. */
const padOf = (bytes: number): Record<string, string> => ({ 'x-pad': 'a'.repeat(bytes) });
const TOKEN = 'direct-token-0123456789abcdef';

/** initialize, the session's GET stream, a tools/call and the DELETE, each with `pad` (40 KiB by default). */
async function sessionWithPad(url: string, pad = padOf(40 * 1024)): Promise<void> {
  const opened = await post(url, initializeBody(), pad);
  assert.equal(opened.status, 200, opened.text);
  const session = { 'mcp-session-id': opened.headers.get('mcp-session-id')!, 'mcp-protocol-version': '2025-11-25' };
  const stream = await fetch(url, {
    headers: { accept: 'text/event-stream', ...session, ...pad },
    signal: AbortSignal.timeout(15_000),
  });
  assert.equal(stream.status, 200, await (stream.status === 200 ? '' : stream.text()));
  assert.match(stream.headers.get('content-type') ?? '', /^text\/event-stream/);
  await stream.body?.cancel();
  const echoed = await post(url, toolCallBody(2, 'echo', { text: 'through' }), { ...session, ...pad });
  assert.equal(echoed.status, 200, echoed.text);
  assert.equal(textOf(rpcResult(echoed)), 'through');
  const ended = await fetch(url, {
    method: 'DELETE',
    headers: { ...session, ...pad },
    signal: AbortSignal.timeout(15_000),
  });
  assert.equal(ended.status, 200, await ended.text());
}

describe('headers the gateway accepts along the whole chain', () => {
  let cluster: TestCluster;
  let directPort: number;
  before(async () => {
    cluster = await startCluster({ schedulers: 1, runtimes: 0, gateways: 0 });
    directPort = await freePort();
    await cluster.startRuntime('r0', 0, {
      args: [
        ...['--direct-listen.enabled', 'true', '--direct-listen.host', '127.0.0.1'],
        ...['--direct-listen.port', String(directPort), '--direct-listen.token', TOKEN],
      ],
    });
    await cluster.waitForRuntimes(['r0']);
  });
  after(() => cluster?.stop());

  const gatewayWith = async (args: readonly string[], headerBytesMax = HEADER_BYTES_MAX): Promise<string> => {
    const gateway = await cluster.addGateway(undefined, {
      args: ['--header-bytes-max', String(headerBytesMax), ...args],
    });
    return `http://127.0.0.1:${gateway.port}/mcp`;
  };
  const MODES: Record<string, readonly string[]> = {
    relay: [],
    proxy: ['--relay-connections', 'false', '--event-streams-over-http2', 'false'],
    direct: ['--upstream-mode', 'direct', '--upstream-token', TOKEN],
  };

  it('through a scheduler on relay connections, event streams over HTTP/2', async () => {
    await sessionWithPad(await gatewayWith([]));
  });

  it('through a scheduler on /api/proxy over HTTP/1.1', async () => {
    await sessionWithPad(await gatewayWith(MODES.proxy!));
  });

  it('straight to the runtime’s direct listener', async () => {
    await sessionWithPad(await gatewayWith(MODES.direct!));
  });

  // A gateway taking more than the hops do: large credentials it strips, or headers it must refuse itself.
  for (const [mode, args] of Object.entries(MODES)) {
    it(`${mode}: forwards headers up to the hops' bound, and answers 431 itself past it`, async () => {
      const url = await gatewayWith(args, 2 * FORWARDED_HEADER_BYTES_MAX);
      // The HTTP/2 hops (event streams to the scheduler, the tunnel) count 32 bytes a field more than names and values.
      await sessionWithPad(url, padOf(FORWARDED_HEADER_BYTES_MAX - 2 * 1024));
      const refused = await post(url, initializeBody(), padOf(FORWARDED_HEADER_BYTES_MAX));
      assert.equal(refused.status, 431, refused.text);
      assert.deepEqual(JSON.parse(refused.text), {
        jsonrpc: '2.0',
        id: 1,
        error: { code: -32600, message: 'Request headers too large', data: { reason: 'header_too_large' } },
      });
      // A cookie is never forwarded: past the hops' bound, it is still the gateway's alone to take.
      const withCookie = await post(url, initializeBody(), { cookie: `c=${'a'.repeat(FORWARDED_HEADER_BYTES_MAX)}` });
      assert.equal(withCookie.status, 200, withCookie.text);
    });
  }
});
