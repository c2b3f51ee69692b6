// Fuzz: the runtime connect handshake (`GET /api/runtime/connect` upgrade)
// with arbitrary `Authorization` and `X-Runtime-Info` values, written on a raw
// socket so that any byte can be tried. Property: the answer is 101 exactly
// when the token is right and the info is valid, else 401 (bad token) or 400
// (bad info), or a 4xx from the HTTP parser itself; never a 5xx, never
// silence; and the real runtime's tunnel is untouched.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import fc from 'fast-check';
import { parseWith, runtimeInfoSchema } from '@switchyard/protocol';
import { CONNECT_REGRESSIONS, type ConnectCase } from './regressions.ts';
import { FUZZ_SEED, TOKEN, describeFailures, runCases, startFuzzCluster, type FuzzCluster } from './support.ts';

const CASES = 10_000;
const PARALLEL = 16;

const b64 = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');
const headerText = fc.string({
  unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)),
  maxLength: 80,
});
const anyText = fc.string({ unit: 'binary', maxLength: 60 });
// Never the real runtime's id: a valid connect for `r0` would (by design) replace its tunnel.
const id = fc.oneof(fc.stringMatching(/^fz[A-Za-z0-9._:@-]{0,20}$/), fc.constantFrom('', 'a b', 'x'.repeat(129)));
const info = fc.record(
  {
    id,
    classes: fc.oneof(fc.constant(['demo']), fc.array(id, { maxLength: 3 }), fc.constant('demo')),
    metadata: fc.dictionary(fc.string({ maxLength: 10 }), fc.oneof(fc.string({ maxLength: 10 }), fc.integer())),
    version: fc.oneof(fc.constantFrom('1.0.0', ''), fc.string({ maxLength: 70 })),
    limits: fc.dictionary(fc.constantFrom('sandboxes', 'x', 'bad key'), fc.oneof(fc.nat(100), fc.double())),
    address: fc.string({ maxLength: 30 }),
    extra: fc.jsonValue({ maxDepth: 1 }),
  },
  { requiredKeys: ['id', 'classes'] },
);

const caseArb: fc.Arbitrary<ConnectCase> = fc.record(
  {
    authorization: fc.oneof(
      { weight: 4, arbitrary: fc.constant('valid') },
      {
        weight: 1,
        arbitrary: fc.constantFrom(`bearer ${TOKEN}`, `Bearer  ${TOKEN}  `, `Bearer ${TOKEN}x`, 'Bearer', 'Basic eDp5'),
      },
      { weight: 2, arbitrary: headerText },
      { weight: 1, arbitrary: anyText },
    ),
    runtimeInfo: fc.oneof(
      { weight: 3, arbitrary: info.map(b64) },
      {
        weight: 3,
        arbitrary: fc
          .record({ id: fc.stringMatching(/^fz[A-Za-z0-9]{1,12}$/), version: fc.constantFrom('1.0.0', '2.0.0-rc.1') })
          .map((v) => b64({ ...v, classes: ['demo'], limits: { sandboxes: 4 } })),
      },
      { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }).map(b64) },
      { weight: 1, arbitrary: fc.uint8Array({ maxLength: 60 }).map((b) => Buffer.from(b).toString('base64url')) },
      { weight: 1, arbitrary: headerText },
      { weight: 1, arbitrary: anyText },
      { weight: 1, arbitrary: fc.constantFrom('A'.repeat(20_000), 'e30'.padEnd(9000, '=')) },
    ),
  },
  { requiredKeys: [] },
);

/** What the scheduler should answer, by the contract (ignoring parser-level refusals). */
function expected(c: ConnectCase): number {
  const auth = c.authorization === 'valid' ? `Bearer ${TOKEN}` : c.authorization;
  const token = auth === undefined ? undefined : /^Bearer\s+(\S+)\s*$/i.exec(auth)?.[1];
  if (token !== TOKEN) return 401;
  if (c.runtimeInfo === undefined || c.runtimeInfo === '') return 400;
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(c.runtimeInfo, 'base64url').toString('utf8'));
  } catch {
    return 400;
  }
  return parseWith(runtimeInfoSchema, decoded).ok ? 101 : 400;
}

/** Sends the upgrade request on a raw socket; resolves with the status of the first response line. */
function upgrade(port: number, c: ConnectCase): Promise<{ status: number; head: string }> {
  const lines = [
    'GET /api/runtime/connect HTTP/1.1',
    `Host: 127.0.0.1:${port}`,
    'Connection: Upgrade',
    'Upgrade: websocket',
    'Sec-WebSocket-Version: 13',
    'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
  ];
  if (c.authorization !== undefined)
    lines.push(`Authorization: ${c.authorization === 'valid' ? `Bearer ${TOKEN}` : c.authorization}`);
  if (c.runtimeInfo !== undefined) lines.push(`X-Runtime-Info: ${c.runtimeInfo}`);
  const request = Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1');
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    let head = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error('no answer within 5 s'));
    }, 5000);
    socket.on('data', (chunk: Buffer) => {
      head += chunk.toString('latin1');
      const match = /^HTTP\/1\.1 (\d{3})/.exec(head);
      if (match) {
        clearTimeout(timer);
        socket.destroy();
        resolve({ status: Number(match[1]), head: head.slice(0, 200) });
      }
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      // A connection closed without a word is allowed only for bytes the HTTP parser cannot read.
      if (!/^HTTP/.test(head)) resolve({ status: 0, head });
    });
    socket.write(request);
  });
}

function judge(c: ConnectCase, got: { status: number; head: string }): string | undefined {
  if (got.status >= 500) return `answered ${got.status}: ${got.head}`;
  const want = expected(c);
  if (got.status === want) return undefined;
  // Node's parser refuses headers with bytes it cannot accept (400) or too large a head (431), or closes.
  if ((got.status === 400 || got.status === 431 || got.status === 0) && want !== 101) return undefined;
  if (
    (got.status === 400 || got.status === 431 || got.status === 0) &&
    /[^\x20-\x7e]/.test(`${c.authorization ?? ''}${c.runtimeInfo ?? ''}`)
  )
    return undefined;
  if (got.status === 431 && (c.runtimeInfo?.length ?? 0) > 8000) return undefined;
  return `expected ${want}, answered ${got.status}: ${got.head}`;
}

describe('fuzz: runtime connect headers', () => {
  let cluster: FuzzCluster;
  before(async () => {
    cluster = await startFuzzCluster(1);
  });
  after(() => cluster?.close());

  for (const { note, input } of CONNECT_REGRESSIONS) {
    it(`regression: refuses or admits ${note} by the contract`, async () => {
      assert.equal(judge(input, await upgrade(cluster.replicas[0]!.port, input)), undefined);
    });
  }

  it(`answers ${CASES} arbitrary handshakes with 101, 400 or 401 as the contract says, never a 5xx`, async () => {
    const cases = fc.sample(caseArb, { numRuns: CASES, seed: FUZZ_SEED });
    const started = performance.now();
    const counts = new Map<number, number>();
    const failures = await runCases(cases, PARALLEL, async (c) => {
      const got = await upgrade(cluster.replicas[0]!.port, c);
      counts.set(got.status, (counts.get(got.status) ?? 0) + 1);
      return judge(c, got);
    });
    console.log(
      `fuzz connect: ${cases.length} handshakes in ${((performance.now() - started) / 1000).toFixed(1)} s; ` +
        `statuses ${JSON.stringify(Object.fromEntries([...counts].sort()))}`,
    );
    assert.equal(failures.length, 0, describeFailures(failures));
    assert.ok((counts.get(101) ?? 0) > 100, 'enough valid handshakes to exercise admission');
    await cluster.assertHealthy();
  });
});
