// Fuzz: tunnel frames. A fake runtime completes the WebSocket handshake at
// /api/runtime/connect (valid token and info) and then writes arbitrary bytes
// or arbitrary HTTP/2 frames where the runtime's HTTP/2 server side belongs.
// Property: the scheduler drops (or keeps) only that tunnel — the process
// survives, the real runtime stays available and reachable through the
// proxy, and no fake runtime outlives its connection.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { WebSocket } from 'ws';
import { TUNNEL_REGRESSIONS, type TunnelCase } from './regressions.ts';
import { FUZZ_SEED, TOKEN, describeFailures, runCases, startFuzzCluster, type FuzzCluster } from './support.ts';
import { openSession } from '../cluster/mcp.ts';
import { until } from '../support/processes.ts';

const CASES = 10_000;
const PARALLEL = 32;
/** Longest wait for the close handshake after a case's bytes. */
const CLOSE_WAIT_MS = 2000;

/** One HTTP/2 frame: 9-byte header (length, type, flags, stream id) and payload. */
function frame(type: number, flags: number, stream: number, payload: Uint8Array, lengthOverride?: number): Buffer {
  const header = Buffer.alloc(9);
  header.writeUIntBE(lengthOverride ?? payload.length, 0, 3);
  header.writeUInt8(type, 3);
  header.writeUInt8(flags, 4);
  header.writeUInt32BE(stream >>> 0, 5);
  return Buffer.concat([header, payload]);
}

const SETTINGS_EMPTY = frame(4, 0, 0, new Uint8Array());
const h2Frame = fc
  .record({
    type: fc.oneof(fc.integer({ min: 0, max: 9 }), fc.integer({ min: 0, max: 255 })),
    flags: fc.integer({ min: 0, max: 255 }),
    stream: fc.oneof(fc.constantFrom(0, 1, 2, 3), fc.nat()),
    payload: fc.uint8Array({ maxLength: 64 }),
    lie: fc.option(fc.integer({ min: 0, max: 0xffffff }), { nil: undefined, freq: 8 }),
  })
  .map((f) => frame(f.type, f.flags, f.stream, f.payload, f.lie));

const caseArb: fc.Arbitrary<TunnelCase> = fc.oneof(
  // A server preface (SETTINGS) and then frames: reaches the frame handling past the preface check.
  {
    weight: 5,
    arbitrary: fc
      .array(h2Frame, { minLength: 1, maxLength: 5 })
      .map((frames) => ({ bytes: Buffer.concat([SETTINGS_EMPTY, ...frames]).toString('base64') })),
  },
  {
    weight: 2,
    arbitrary: fc
      .array(h2Frame, { minLength: 1, maxLength: 5 })
      .map((f) => ({ bytes: Buffer.concat(f).toString('base64') })),
  },
  {
    weight: 2,
    arbitrary: fc
      .uint8Array({ minLength: 1, maxLength: 256 })
      .map((b) => ({ bytes: Buffer.from(b).toString('base64') })),
  },
);

let fakes = 0;
/**
 * Connects as fake runtime `fzt<N>`, writes the case's bytes as binary
 * frames, then closes: the close frame follows the data, so the scheduler
 * reads every byte before it sees the close.
 */
async function runFake(url: string, c: TunnelCase): Promise<string | undefined> {
  const info = Buffer.from(JSON.stringify({ id: `fzt${fakes++ % 64}`, classes: ['demo'] })).toString('base64url');
  const ws = new WebSocket(`${url.replace('http', 'ws')}/api/runtime/connect`, {
    perMessageDeflate: false,
    headers: { authorization: `Bearer ${TOKEN}`, 'x-runtime-info': info },
  });
  ws.on('error', () => {});
  try {
    const opened = await new Promise<boolean | string>((resolve) => {
      ws.once('open', () => resolve(true));
      ws.once('unexpected-response', (_req, res) => resolve(`handshake refused with ${res.statusCode}`));
      ws.once('close', () => resolve(false));
    });
    if (opened !== true) return opened === false ? 'closed before the handshake' : opened;
    const bytes = Buffer.from(c.bytes, 'base64');
    // Split in two frames at a random-ish point, as a byte stream may arrive.
    const cut = bytes.length >> 1;
    ws.send(bytes.subarray(0, cut));
    ws.send(bytes.subarray(cut));
    const closed = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, CLOSE_WAIT_MS);
      ws.once('close', () => (clearTimeout(timer), resolve()));
    });
    if (ws.readyState === WebSocket.OPEN) ws.close(1000);
    await closed;
    return undefined;
  } finally {
    ws.terminate();
  }
}

describe('fuzz: tunnel frames from a fake runtime', () => {
  let cluster: FuzzCluster;
  before(async () => {
    cluster = await startFuzzCluster(1);
  });
  after(() => cluster?.close());

  const assertOnlyFakesDropped = async (): Promise<void> => {
    await cluster.assertHealthy();
    // The real runtime still serves MCP through the replica's proxy.
    await openSession({ scheduler: cluster.replicas[0]!.url, runtime: 'r0', process: `check-${fakes}` });
    await until('every fake tunnel to be gone', async () => {
      const res = await fetch(`${cluster.replicas[0]!.url}/api/runtimes`);
      const body = (await res.json()) as { runtimes: Array<{ id: string; available: boolean }> };
      return body.runtimes.every((r) => r.id === 'r0' || !r.available) || undefined;
    });
  };

  for (const { note, input } of TUNNEL_REGRESSIONS) {
    it(`regression: drops only the tunnel that sent ${note}`, async () => {
      assert.equal(await runFake(cluster.replicas[0]!.url, input), undefined);
      await assertOnlyFakesDropped();
    });
  }

  it(`drops only the offending tunnel over ${CASES} arbitrary byte streams and HTTP/2 frames`, async () => {
    const cases = fc.sample(caseArb, { numRuns: CASES, seed: FUZZ_SEED });
    const started = performance.now();
    const failures = await runCases(cases, PARALLEL, (c) => runFake(cluster.replicas[0]!.url, c));
    console.log(`fuzz tunnel: ${cases.length} fake tunnels in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    assert.equal(failures.length, 0, describeFailures(failures));
    await assertOnlyFakesDropped();
  });
});
