// Fuzz: the scheduler's reader of a runtime's `/watch` stream (watchRuntime
// feeding a RuntimeMirror) against arbitrary SSE served by a tiny HTTP server:
// well-formed snapshot/delta events and snapshot parts with mutated fields
// and ids, arbitrary event text, and arbitrary bytes. Property: nothing
// throws out of the watcher; every malformed event is reported through
// onError; the mirror only ever holds schema-valid state; each stream ends in
// a report (no hang).
// The reconnect timer runs on a ManualClock that is never advanced, so each
// case is exactly one connection.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import fc from 'fast-check';
import { ManualClock } from '@switchyard/clock/testing';
import { RuntimeMirror, watchRuntime } from '@switchyard/agent';
import { parseWith, watchSnapshotSchema } from '@switchyard/protocol';
import { WATCH_REGRESSIONS, type WatchCase } from './regressions.ts';
import { FUZZ_SEED, describeFailures, runCases } from './support.ts';

const CASES = 10_000;
const PARALLEL = 16;
const CASE_TIMEOUT_MS = 5000;

const ident = fc.oneof(fc.stringMatching(/^[a-z0-9]{1,6}$/), fc.constantFrom('', 'a b', 'x'.repeat(129)));
const op = fc.oneof(
  fc.record({ op: fc.constantFrom('process.add', 'process.remove'), process: ident }),
  fc.record({ op: fc.constantFrom('thread.add', 'thread.remove'), process: ident, thread: ident }),
  fc.record({
    op: fc.constant('weight'),
    idleWeight: fc.dictionary(fc.constantFrom('sandboxes', 'x y'), fc.oneof(fc.nat(10), fc.double())),
  }),
  fc.record({
    op: fc.constant('metadata'),
    metadata: fc.dictionary(fc.constantFrom('zone', ''), fc.string({ maxLength: 5 })),
  }),
  fc.record({ op: fc.constantFrom('bogus', 'runtime.upsert') }),
);
const snapshot = fc.record({
  processes: fc.array(ident, { maxLength: 4 }),
  threads: fc.array(fc.record({ process: ident, thread: ident }), { maxLength: 4 }),
  idleWeight: fc.dictionary(fc.constant('sandboxes'), fc.nat(10)),
  metadata: fc.dictionary(fc.constant('zone'), fc.string({ maxLength: 4 })),
});
const id = fc.oneof(
  { weight: 6, arbitrary: fc.nat(6).map(String) },
  { weight: 1, arbitrary: fc.constantFrom('', 'x', '-1', '1e3', '9007199254740993') },
);
const event = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.tuple(id, snapshot).map(([i, s]) => `id: ${i}\nevent: snapshot\ndata: ${JSON.stringify(s)}\n\n`),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(id, fc.nat(3), snapshot)
      .map(
        ([i, part, s]) =>
          `id: ${i}\nevent: snapshot-part\ndata: ${JSON.stringify({ part, processes: s.processes, threads: s.threads })}\n\n`,
      ),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(id, fc.nat(4), snapshot)
      .map(
        ([i, parts, s]) =>
          `id: ${i}\nevent: snapshot-end\ndata: ${JSON.stringify({ parts, idleWeight: s.idleWeight, metadata: s.metadata })}\n\n`,
      ),
  },
  {
    weight: 4,
    arbitrary: fc
      .tuple(id, fc.array(op, { maxLength: 4 }))
      .map(([i, ops]) => `id: ${i}\nevent: delta\ndata: ${JSON.stringify({ ops })}\n\n`),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(
        fc.constantFrom('snapshot', 'snapshot-part', 'snapshot-end', 'delta', 'other', ''),
        fc.jsonValue({ maxDepth: 2 }),
      )
      .map(([e, d]) => `id: 1\nevent: ${e}\ndata: ${JSON.stringify(d)}\n\n`),
  },
  { weight: 1, arbitrary: fc.string({ maxLength: 80 }) },
  { weight: 1, arbitrary: fc.constantFrom(': keep-alive\n\n', 'retry: 1\n\n', 'data: {"a":\ndata: 1}\n\n', '\n\n\n') },
);
const caseArb: fc.Arbitrary<WatchCase> = fc.oneof(
  {
    weight: 9,
    arbitrary: fc.array(event, { minLength: 1, maxLength: 6 }).map((events) => ({ stream: events.join('') })),
  },
  {
    weight: 1,
    arbitrary: fc.uint8Array({ maxLength: 200 }).map((b) => ({ stream: Buffer.from(b).toString('latin1') })),
  },
);

describe('fuzz: /watch events into the watcher and mirror', () => {
  const streams = new Map<string, string>();
  let server: Server;
  let base: string;
  before(async () => {
    server = createServer((req, res) => {
      const stream = streams.get(req.url ?? '');
      if (stream === undefined) return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' });
      res.end(Buffer.from(stream, 'latin1'));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  let next = 0;
  /** Runs one stream through a fresh watcher; resolves with a failure or undefined. */
  async function check(c: WatchCase): Promise<string | undefined> {
    const path = `/watch/${next++}`;
    streams.set(path, c.stream);
    const mirror = new RuntimeMirror();
    const problems: string[] = [];
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no report within ${CASE_TIMEOUT_MS} ms`)), CASE_TIMEOUT_MS);
        const watcher = watchRuntime({
          url: `${base}${path}`,
          fetch: globalThis.fetch,
          clock: new ManualClock(),
          onSnapshot: (s) => mirror.applySnapshot(s),
          onOps: (ops) => mirror.applyOps(ops),
          // The stream always ends (the server closes it), so every case ends in a report.
          onError: () => {
            clearTimeout(timer);
            watcher.close();
            resolve();
          },
        });
      });
    } catch (error) {
      problems.push((error as Error).message);
    } finally {
      streams.delete(path);
    }
    const state = parseWith(watchSnapshotSchema, mirror.state());
    if (!state.ok) problems.push(`mirror holds invalid state: ${state.error}`);
    return problems.length ? problems.join('; ') : undefined;
  }

  for (const { note, input } of WATCH_REGRESSIONS) {
    it(`regression: handles ${note}`, async () => assert.equal(await check(input), undefined));
  }

  it(`reads ${CASES} arbitrary streams without throwing, hanging or corrupting the mirror`, async () => {
    const cases = fc.sample(caseArb, { numRuns: CASES, seed: FUZZ_SEED });
    const started = performance.now();
    const failures = await runCases(cases, PARALLEL, check);
    console.log(`fuzz watch: ${cases.length} streams in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    assert.equal(failures.length, 0, describeFailures(failures));
  });
});
