// Time to first tool call for a new stdio sandbox (server-everything), with
// and without a warm pool: a fresh process id per sample, measured with the
// real SDK client over node http on loopback from its first request of the
// new session (`initialize`) to the first `echo` result. Both cases are
// measured the same way, by the same code; constructing the client object
// is outside the span (no request is sent), its initialize and initialized
// round trips are inside. Between samples the bench waits for the pool to
// refill and the previous child to exit, so each sample sees a ready pool
// (the steady state the pool is for). Progress lines split each median into
// the session handshake and the first call.
import { once } from 'node:events';
import { readFileSync, readdirSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createSandboxHost, type StateReporter } from '@switchyard/sandbox';
import { percentile, progress, report } from '../report.ts';

const SAMPLES = 20;
const POOL_SIZE = 2;
const everything = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/dist/index.js', {
  paths: [process.cwd()],
});
const silent = { info() {}, warn() {}, error() {}, debug() {} };
const reporter: StateReporter = {
  addProcess() {},
  removeProcess() {},
  addThread() {},
  removeThread() {},
  setIdleWeight() {},
};

function childCount(): number {
  let n = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(ppid) === process.pid && state !== 'Z') n++;
    } catch {
      // gone
    }
  }
  return n;
}

async function until(check: () => boolean): Promise<void> {
  const deadline = performance.now() + 30_000;
  while (!check()) {
    if (performance.now() > deadline) throw new Error('timed out waiting for the pool');
    await new Promise((r) => setTimeout(r, 10));
  }
}

interface Sample {
  readonly totalMs: number;
  /** initialize + notifications/initialized, as the client sees them. */
  readonly handshakeMs: number;
}

async function measure(warmPool: number): Promise<number[]> {
  const host = createSandboxHost({
    runtimeId: 'bench',
    classes: {
      ev: { engine: 'stdio', command: process.execPath, args: [everything, 'stdio'], warmPool, expireSeconds: 0 },
    },
    sandboxesMax: 10,
    sessionIdleMs: 60_000,
    reporter,
    logger: silent,
  });
  const server = http.createServer((req, res) => void host.handleMcp(req, res));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`);
  const samples: Sample[] = [];
  try {
    for (let i = 0; i < SAMPLES; i++) {
      // A ready pool, and the previous sample's child gone.
      await until(() => host.stats().warm === warmPool && childCount() === warmPool);
      const transport = new StreamableHTTPClientTransport(url, {
        requestInit: { headers: { 'x-switchyard-class': 'ev', 'x-switchyard-process': `bench-${warmPool}-${i}` } },
      });
      const client = new Client({ name: 'bench', version: '1.0.0' });
      const startedAt = performance.now();
      await client.connect(transport);
      const connectedAt = performance.now();
      await client.callTool({ name: 'echo', arguments: { message: 'x' } });
      const sample = { totalMs: performance.now() - startedAt, handshakeMs: connectedAt - startedAt };
      samples.push(sample);
      await transport.terminateSession();
      await client.close();
      progress(
        `pool=${warmPool} sample ${i + 1}/${SAMPLES}: ${sample.totalMs.toFixed(1)} ms (handshake ${sample.handshakeMs.toFixed(1)})`,
      );
    }
  } finally {
    server.closeAllConnections();
    server.close();
    await host.close();
  }
  const sorted = (f: (s: Sample) => number): number[] => samples.map(f).sort((x, y) => x - y);
  const [handshake, call] = [sorted((s) => s.handshakeMs), sorted((s) => s.totalMs - s.handshakeMs)];
  progress(
    `pool=${warmPool} p50: handshake ${percentile(handshake, 50).toFixed(1)} ms, first call ${percentile(call, 50).toFixed(1)} ms`,
  );
  return sorted((s) => s.totalMs);
}

const cold = await measure(0);
const warm = await measure(POOL_SIZE);
report('sandbox', [
  { metric: 'first_call_cold_p50', value: percentile(cold, 50), unit: 'ms' },
  { metric: 'first_call_cold_p95', value: percentile(cold, 95), unit: 'ms' },
  { metric: 'first_call_warm_pool_p50', value: percentile(warm, 50), unit: 'ms' },
  { metric: 'first_call_warm_pool_p95', value: percentile(warm, 95), unit: 'ms' },
]);
