// Tunnel bench: a scheduler (this process) and a runtime (child process)
// joined by the real tunnel on 127.0.0.1. Measured in one run:
// - throughput of one HTTP/2 stream and of 64 parallel streams, against the
//   same byte counts over direct loopback TCP (one and 64 connections);
// - the latency an HTTP/1.1 round trip gains by going through a
//   proxyToTunnel server, against calling the same handler over HTTP/1.1.
// Each path and its baseline run in ROUNDS interleaved rounds (the order
// flipping every round), as in the gateway bench: on a shared machine load
// drifts within seconds, and one long run after the other charged that drift
// to whichever ran during a busy spell. Every loop has a fixed count; the
// child exits when our stdin closes.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { createTunnelEndpoint, proxyToTunnel } from '@switchyard/tunnel';
import type { Tunnel } from '@switchyard/tunnel';
import { percentile, progress, report } from '../report.ts';

const TOKEN = 'bench-token';
const MB = 1_000_000;
const ONE_STREAM_BYTES = 512 * 1024 * 1024;
const PARALLEL = 64;
const PER_STREAM_BYTES = 8 * 1024 * 1024;
const LATENCY_CALLS = 3000;
const WARMUP_CALLS = 300;
/** Interleaved rounds per comparison; byte counts and call counts divide evenly. */
const ROUNDS = 4;

async function main(): Promise<void> {
  const accepted = Promise.withResolvers<Tunnel>();
  const endpoint = createTunnelEndpoint({ tokens: () => [TOKEN], maxRuntimes: 1, onTunnel: accepted.resolve });
  const scheduler = http.createServer((req, res) => proxyToTunnel(endpoint.get('bench'), req, res, req.url ?? '/'));
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
    const ports = JSON.parse(line) as { httpPort: number; tcpPort: number };
    const tunnel = await accepted.promise;
    progress(`runtime connected (generation ${tunnel.generation})`);

    await tunnelBytes(tunnel, 32 * 1024 * 1024);
    await tcpBytes(ports.tcpPort, 32 * 1024 * 1024);
    const one = await interleaved(
      () => tunnelBytes(tunnel, ONE_STREAM_BYTES / ROUNDS),
      () => tcpBytes(ports.tcpPort, ONE_STREAM_BYTES / ROUNDS),
    );
    const oneStream = rate(ONE_STREAM_BYTES, one.path);
    const oneTcp = rate(ONE_STREAM_BYTES, one.base);
    progress(`one stream: ${oneStream.toFixed(0)} MB/s`);
    progress(`one TCP connection: ${oneTcp.toFixed(0)} MB/s`);
    const total = PARALLEL * PER_STREAM_BYTES;
    const many = await interleaved(
      () => fanOut(() => tunnelBytes(tunnel, PER_STREAM_BYTES / ROUNDS)),
      () => fanOut(() => tcpBytes(ports.tcpPort, PER_STREAM_BYTES / ROUNDS)),
    );
    const manyStreams = rate(total, many.path);
    const manyTcp = rate(total, many.base);
    progress(`${PARALLEL} streams: ${manyStreams.toFixed(0)} MB/s`);
    progress(`${PARALLEL} TCP connections: ${manyTcp.toFixed(0)} MB/s`);

    const raw = await streamLatencies(tunnel);
    progress(`bare tunnel stream p50 ${percentile(raw, 50).toFixed(3)} ms, p99 ${percentile(raw, 99).toFixed(3)} ms`);
    const direct = latencyLane(ports.httpPort);
    const proxied = latencyLane(schedulerPort);
    await Promise.all([warm(direct), warm(proxied)]);
    await interleaved(
      () => sample(proxied, LATENCY_CALLS / ROUNDS),
      () => sample(direct, LATENCY_CALLS / ROUNDS),
    );
    direct.agent.destroy();
    proxied.agent.destroy();
    const [d, p] = [direct.samples.sort((a, b) => a - b), proxied.samples.sort((a, b) => a - b)];
    const figures = {
      directP50: percentile(d, 50),
      directP99: percentile(d, 99),
      proxiedP50: percentile(p, 50),
      proxiedP99: percentile(p, 99),
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
      { metric: 'added_latency_p50', value: figures.proxiedP50 - figures.directP50, unit: 'ms' },
      { metric: 'added_latency_p99', value: figures.proxiedP99 - figures.directP99, unit: 'ms' },
    ]);
  } finally {
    child.stdin!.end();
    endpoint.close();
    scheduler.closeAllConnections();
    scheduler.close();
  }
}

const rate = (bytes: number, ms: number): number => bytes / MB / (ms / 1000);

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await fn();
  return performance.now() - start;
}

function fanOut(fn: () => Promise<number>): Promise<number[]> {
  return Promise.all(Array.from({ length: PARALLEL }, fn));
}

/** Reads `/bytes/<n>` through the tunnel; resolves with the bytes received. */
async function tunnelBytes(tunnel: Tunnel, bytes: number): Promise<number> {
  const stream = tunnel.request({ ':path': `/bytes/${bytes}` });
  let received = 0;
  for await (const chunk of stream) received += (chunk as Buffer).length;
  if (received !== bytes) throw new Error(`tunnel delivered ${received} of ${bytes} bytes`);
  return received;
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
  readonly agent: http.Agent;
  readonly samples: number[];
}

function latencyLane(port: number): LatencyLane {
  return { port, agent: new http.Agent({ keepAlive: true, maxSockets: 1 }), samples: [] };
}

/** One keep-alive GET of a tiny answer; resolves with its latency in ms. */
async function ping(lane: LatencyLane): Promise<number> {
  const start = performance.now();
  await new Promise<void>((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port: lane.port, path: '/ping', agent: lane.agent }, (res) => {
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

/**
 * Runs `path` and `base` ROUNDS times each, alternating which goes first;
 * resolves with the total milliseconds each took.
 */
async function interleaved(
  path: () => Promise<unknown>,
  base: () => Promise<unknown>,
): Promise<{ path: number; base: number }> {
  const total = { path: 0, base: 0 };
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? (['path', 'base'] as const) : (['base', 'path'] as const);
    for (const which of order) total[which] += await timed(which === 'path' ? path : base);
  }
  return total;
}

/** Sequential GETs on bare tunnel streams (no HTTP/1.1 hop), for locating the added latency. */
async function streamLatencies(tunnel: Tunnel): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < WARMUP_CALLS + LATENCY_CALLS; i++) {
    const start = performance.now();
    const stream = tunnel.request({ ':path': '/ping' });
    stream.resume();
    await once(stream, 'end');
    if (i >= WARMUP_CALLS) samples.push(performance.now() - start);
  }
  return samples.sort((a, b) => a - b);
}

await main();
