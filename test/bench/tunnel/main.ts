// Tunnel bench: a scheduler (this process) and a runtime (child process)
// joined by the real tunnel on 127.0.0.1. Measured in one run:
// - throughput of one HTTP/2 stream and of 64 parallel streams, against the
//   same byte counts over direct loopback TCP (one and 64 connections);
// - the latency an HTTP/1.1 round trip gains by going through a
//   proxyToTunnel server, against calling the same handler over HTTP/1.1;
// - the tunnel against HTTP/2 with the tunnel's settings on a plain TCP
//   connection between the same two processes (one stream's throughput, a
//   bare stream's round trip): what the tunnel costs over HTTP/2 itself;
// - the same for the WebSocket transport (a second tunnel from the same
//   runtime), the fallback for proxies that pass only WebSocket upgrades.
// Each path and its baselines run in ROUNDS interleaved rounds (each round
// starting one later), as in the gateway bench: on a shared machine load
// drifts within seconds, and one long run after the other charged that drift
// to whichever ran during a busy spell. Every loop has a fixed count; the
// child exits when our stdin closes.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { H2_TUNING, createTunnelEndpoint, h2Settings, proxyToTunnel } from '@switchyard/tunnel';
import { percentile, progress, report } from '../report.ts';
import { type OpenStream, interleaved, rate, streamBytes } from './streams.ts';

const TOKEN = 'bench-token';
const ONE_STREAM_BYTES = 512 * 1024 * 1024;
const PARALLEL = 64;
const PER_STREAM_BYTES = 8 * 1024 * 1024;
const LATENCY_CALLS = 3000;
const WARMUP_CALLS = 300;
/** Interleaved rounds per comparison; byte counts and call counts divide evenly. */
const ROUNDS = 4;

async function main(): Promise<void> {
  const endpoint = createTunnelEndpoint({ tokens: () => [TOKEN], maxRuntimes: 2 });
  // `/ws/<path>` goes through the WebSocket-transport tunnel, anything else through the default one.
  const scheduler = http.createServer((req, res) => {
    const url = req.url ?? '/';
    if (url.startsWith('/ws/')) return proxyToTunnel(endpoint.get('bench-ws'), req, res, url.slice(3));
    proxyToTunnel(endpoint.get('bench'), req, res, url);
  });
  scheduler.on('upgrade', (req, socket, head) => endpoint.handleUpgrade(req, socket, head));
  scheduler.listen(0, '127.0.0.1');
  await once(scheduler, 'listening');
  const schedulerPort = (scheduler.address() as AddressInfo).port;
  const child = spawn(
    process.execPath,
    [join(import.meta.dirname, 'runtime.ts'), `http://127.0.0.1:${schedulerPort}`, TOKEN],
    {
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  );
  try {
    const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
    const ports = JSON.parse(line) as { httpPort: number; h2Port: number; tcpPort: number };
    const tunnel = endpoint.get('bench')!;
    const wsTunnel = endpoint.get('bench-ws')!;
    progress(`runtime connected: ${tunnel.transport} and ${wsTunnel.transport} tunnels`);
    const h2 = await connectH2(ports.h2Port);
    const overTunnel: OpenStream = (headers) => tunnel.request(headers);
    const overWs: OpenStream = (headers) => wsTunnel.request(headers);
    const overTcp: OpenStream = (headers) => h2.request(headers);

    for (const open of [overTunnel, overWs, overTcp]) await streamBytes(open, 32 * 1024 * 1024);
    await tcpBytes(ports.tcpPort, 32 * 1024 * 1024);
    const [oneStream, oneWs, oneTcp, oneH2Tcp] = (
      await interleaved(
        ROUNDS,
        () => streamBytes(overTunnel, ONE_STREAM_BYTES / ROUNDS),
        () => streamBytes(overWs, ONE_STREAM_BYTES / ROUNDS),
        () => tcpBytes(ports.tcpPort, ONE_STREAM_BYTES / ROUNDS),
        () => streamBytes(overTcp, ONE_STREAM_BYTES / ROUNDS),
      )
    ).map((ms) => rate(ONE_STREAM_BYTES, ms)) as [number, number, number, number];
    progress(`one stream: ${oneStream.toFixed(0)} MB/s (over WebSocket ${oneWs.toFixed(0)} MB/s)`);
    progress(`one TCP connection: ${oneTcp.toFixed(0)} MB/s`);
    progress(`one HTTP/2 stream on TCP: ${oneH2Tcp.toFixed(0)} MB/s`);
    const total = PARALLEL * PER_STREAM_BYTES;
    const [manyStreams, manyTcp] = (
      await interleaved(
        ROUNDS,
        () => fanOut(() => streamBytes(overTunnel, PER_STREAM_BYTES / ROUNDS)),
        () => fanOut(() => tcpBytes(ports.tcpPort, PER_STREAM_BYTES / ROUNDS)),
      )
    ).map((ms) => rate(total, ms)) as [number, number];
    progress(`${PARALLEL} streams: ${manyStreams.toFixed(0)} MB/s`);
    progress(`${PARALLEL} TCP connections: ${manyTcp.toFixed(0)} MB/s`);

    const [raw, rawWs, rawH2] = [[], [], []] as [number[], number[], number[]];
    for (const open of [overTunnel, overWs, overTcp]) await streamLatencies(open, WARMUP_CALLS, []);
    await interleaved(
      ROUNDS,
      () => streamLatencies(overTunnel, LATENCY_CALLS / ROUNDS, raw),
      () => streamLatencies(overWs, LATENCY_CALLS / ROUNDS, rawWs),
      () => streamLatencies(overTcp, LATENCY_CALLS / ROUNDS, rawH2),
    );
    for (const samples of [raw, rawWs, rawH2]) samples.sort((a, b) => a - b);
    progress(`bare tunnel stream p50 ${percentile(raw, 50).toFixed(3)} ms, p99 ${percentile(raw, 99).toFixed(3)} ms`);
    progress(`bare WebSocket-tunnel stream p50 ${percentile(rawWs, 50).toFixed(3)} ms`);
    progress(`bare HTTP/2 stream on TCP p50 ${percentile(rawH2, 50).toFixed(3)} ms`);
    h2.close();
    const direct = latencyLane(ports.httpPort, '/ping');
    const proxied = latencyLane(schedulerPort, '/ping');
    const proxiedWs = latencyLane(schedulerPort, '/ws/ping');
    await Promise.all([warm(direct), warm(proxied), warm(proxiedWs)]);
    await interleaved(
      ROUNDS,
      () => sample(proxied, LATENCY_CALLS / ROUNDS),
      () => sample(direct, LATENCY_CALLS / ROUNDS),
      () => sample(proxiedWs, LATENCY_CALLS / ROUNDS),
    );
    for (const lane of [direct, proxied, proxiedWs]) lane.agent.destroy();
    const [d, p, w] = [direct, proxied, proxiedWs].map((lane) => lane.samples.sort((a, b) => a - b)) as [
      number[],
      number[],
      number[],
    ];
    const figures = {
      directP50: percentile(d, 50),
      directP99: percentile(d, 99),
      proxiedP50: percentile(p, 50),
      proxiedP99: percentile(p, 99),
      proxiedWebSocketP50: percentile(w, 50),
    };
    progress(`latency ms: ${JSON.stringify(figures)}`);
    report('tunnel', [
      { metric: 'one_stream_throughput', value: oneStream, unit: 'MB/s' },
      { metric: 'one_tcp_throughput', value: oneTcp, unit: 'MB/s' },
      { metric: 'one_stream_vs_tcp', value: oneStream / oneTcp, unit: 'ratio' },
      { metric: 'streams64_throughput', value: manyStreams, unit: 'MB/s' },
      { metric: 'tcp64_throughput', value: manyTcp, unit: 'MB/s' },
      { metric: 'streams64_vs_tcp', value: manyStreams / manyTcp, unit: 'ratio' },
      { metric: 'direct_http_p50', value: figures.directP50, unit: 'ms' },
      { metric: 'direct_http_p99', value: figures.directP99, unit: 'ms' },
      { metric: 'proxied_http_p50', value: figures.proxiedP50, unit: 'ms' },
      { metric: 'proxied_http_p99', value: figures.proxiedP99, unit: 'ms' },
      { metric: 'bare_stream_p50', value: percentile(raw, 50), unit: 'ms' },
      { metric: 'bare_stream_p99', value: percentile(raw, 99), unit: 'ms' },
      { metric: 'h2_tcp_stream_p50', value: percentile(rawH2, 50), unit: 'ms' },
      { metric: 'h2_tcp_one_stream_throughput', value: oneH2Tcp, unit: 'MB/s' },
      { metric: 'one_stream_vs_h2_tcp', value: oneStream / oneH2Tcp, unit: 'ratio' },
      { metric: 'added_latency_p50', value: figures.proxiedP50 - figures.directP50, unit: 'ms' },
      { metric: 'added_latency_p99', value: figures.proxiedP99 - figures.directP99, unit: 'ms' },
      // The WebSocket transport (for proxies that pass only WebSocket upgrades), from the same rounds.
      { metric: 'websocket_one_stream_throughput', value: oneWs, unit: 'MB/s' },
      { metric: 'websocket_one_stream_vs_tcp', value: oneWs / oneTcp, unit: 'ratio' },
      { metric: 'websocket_stream_p50', value: percentile(rawWs, 50), unit: 'ms' },
      { metric: 'websocket_layer_p50', value: percentile(rawWs, 50) - percentile(rawH2, 50), unit: 'ms' },
      { metric: 'websocket_added_latency_p50', value: figures.proxiedWebSocketP50 - figures.directP50, unit: 'ms' },
    ]);
  } finally {
    child.stdin!.end();
    endpoint.close();
    scheduler.closeAllConnections();
    scheduler.close();
  }
}

function fanOut(fn: () => Promise<number>): Promise<number[]> {
  return Promise.all(Array.from({ length: PARALLEL }, fn));
}

/** HTTP/2 with the tunnel's settings on a plain TCP connection to the runtime's h2c port. */
async function connectH2(port: number): Promise<http2.ClientHttp2Session> {
  const session = http2.connect(`http://127.0.0.1:${port}`, {
    settings: h2Settings('scheduler'),
    maxSessionMemory: H2_TUNING.maxSessionMemoryMb,
  });
  await once(session, 'connect');
  session.setLocalWindowSize(H2_TUNING.sessionWindowBytes);
  return session;
}

/** Asks the raw TCP blaster for `bytes`; resolves with the bytes received. */
async function tcpBytes(port: number, bytes: number): Promise<number> {
  const socket = net.connect(port, '127.0.0.1');
  await once(socket, 'connect');
  socket.write(String(bytes));
  let received = 0;
  for await (const chunk of socket) received += (chunk as Buffer).length;
  if (received !== bytes) throw new Error(`tcp delivered ${received} of ${bytes} bytes`);
  return received;
}

/** One way to reach the `/ping` handler, with the latencies it has collected. */
interface LatencyLane {
  readonly port: number;
  readonly path: string;
  readonly agent: http.Agent;
  readonly samples: number[];
}

function latencyLane(port: number, path: string): LatencyLane {
  return { port, path, agent: new http.Agent({ keepAlive: true, maxSockets: 1 }), samples: [] };
}

/** One keep-alive GET of a tiny answer; resolves with its latency in ms. */
async function ping(lane: LatencyLane): Promise<number> {
  const start = performance.now();
  await new Promise<void>((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port: lane.port, path: lane.path, agent: lane.agent }, (res) => {
        res.resume();
        res.once('end', resolve);
      })
      .once('error', reject);
  });
  return performance.now() - start;
}

async function warm(lane: LatencyLane): Promise<void> {
  for (let i = 0; i < WARMUP_CALLS; i++) await ping(lane);
}

/** `calls` sequential GETs, their latencies added to the lane's. */
async function sample(lane: LatencyLane, calls: number): Promise<void> {
  for (let i = 0; i < calls; i++) lane.samples.push(await ping(lane));
}

/** `calls` sequential GETs on bare streams (no HTTP/1.1 hop), their latencies added to `samples`. */
async function streamLatencies(open: OpenStream, calls: number, samples: number[]): Promise<void> {
  for (let i = 0; i < calls; i++) {
    const start = performance.now();
    const stream = open({ ':path': '/ping' });
    stream.resume();
    await once(stream, 'end');
    samples.push(performance.now() - start);
  }
}

await main();
