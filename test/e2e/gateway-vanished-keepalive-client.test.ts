// An MCP client whose host vanishes (powered off, its network gone: no FIN,
// no RST) while it holds a session's GET stream through the gateway binary,
// a stream that carries only the SDK's keep-alive comments (every 15 s).
// Those few bytes never fill the kernel's send buffer, so the gateway's
// writes never wait in the process (the write-stall bound does not see
// them), and TCP keepalive does not probe while they wait for an
// acknowledgement: only the kernel's retransmission timeout (about 15
// minutes) would end the connection, and with it the scheduler's stream and
// the runtime's behind it. The client runs in a network namespace of its
// own and dials the gateway over a veth pair; nftables then drops every
// packet of the namespace, as a vanished host would. Needs root, `ip` and
// `nft`; skipped with the reason otherwise.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { createPartition, netnsUnavailable, type Partition } from '../chaos/netns.ts';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { until } from '../support/processes.ts';
import { LEGACY, initializeBody, metric } from './support.ts';

/** Short, for a test in real time; the bound applies from the first unacknowledged keep-alive. */
const WRITE_STALL_TIMEOUT_MS = 3000;
/** The SDK's keep-alive interval, plus the bound, plus a sweep, with room for a loaded machine. */
const CLOSED_WITHIN_MS = 40_000;

const unavailable = netnsUnavailable();
if (unavailable) console.log(`gateway-vanished-keepalive-client: skipped: ${unavailable}`);

/** A legacy client that opens a session and its GET stream, then reads it until it ends. */
function clientScript(gatewayUrl: string): string {
  return `
    const H = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const init = await fetch(${JSON.stringify(gatewayUrl)}, { method: 'POST', headers: H, body: ${JSON.stringify(JSON.stringify(initializeBody()))} });
    await init.text();
    const session = { 'mcp-session-id': init.headers.get('mcp-session-id'), 'mcp-protocol-version': '${LEGACY}' };
    const body = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' });
    await (await fetch(${JSON.stringify(gatewayUrl)}, { method: 'POST', headers: { ...H, ...session }, body })).text();
    const res = await fetch(${JSON.stringify(gatewayUrl)}, { headers: { accept: 'text/event-stream', ...session } });
    console.log('stream', res.status);
    for await (const _ of res.body);
  `;
}

describe(
  'a client that vanishes holding a GET stream that carries only keep-alive comments',
  { skip: unavailable },
  () => {
    let cluster: TestCluster;
    let partition: Partition | undefined;
    let client: ChildProcess | undefined;

    before(async () => {
      partition = createPartition();
      cluster = await startCluster({
        schedulers: 1,
        runtimes: 1,
        gatewayArgs: ['--host', '0.0.0.0', '--write-stall-timeout-ms', String(WRITE_STALL_TIMEOUT_MS)],
      });
    });
    after(async () => {
      client?.kill('SIGKILL');
      await cluster?.stop();
      await partition?.close();
    });

    it('has its connection closed once its keep-alives go unacknowledged for the write stall bound, and the runtime stream behind it', async () => {
      const gateway = `http://127.0.0.1:${cluster.gateways[0]!.port}`;
      const openStreams = (): Promise<number> => metric(gateway, 'switchyard_gateway_sse_streams_open');
      const runtimeStreams = async (): Promise<number> => {
        const text = await (await fetch(`${cluster.schedulerUrls()[0]}/api/proxy/r0/metrics`)).text();
        return Number(/^switchyard_runtime_event_streams (\d+)$/m.exec(text)?.[1]);
      };
      const url = `http://${partition!.hostAddress}:${cluster.gateways[0]!.port}/mcp`;
      client = spawn(
        partition!.wrapper[0]!,
        [...partition!.wrapper.slice(1), process.execPath, '--input-type=module', '-e', clientScript(url)],
        {
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      );
      await until('the client stream open', async () => (await openStreams()) === 1, 15_000);
      assert.equal(await runtimeStreams(), 1);

      partition!.cut();
      const cutAt = performance.now();
      await until('the stream closed', async () => (await openStreams()) === 0, CLOSED_WITHIN_MS);
      console.log(
        `gateway-vanished-keepalive-client: closed ${((performance.now() - cutAt) / 1000).toFixed(1)} s after the cut`,
      );
      assert.equal(await metric(gateway, 'switchyard_gateway_connections_write_stalled_total'), 1);
      await until('the runtime stream behind it ended', async () => (await runtimeStreams()) === 0, 5000);
    });
  },
);
