// Fuzz: POST /api/schedule with arbitrary JSON, schedule-shaped JSON and
// arbitrary bytes. Property: a body the schema rejects gets a 4xx; a body it
// accepts gets 200 or 503 `unschedulable` (an answer about the cluster, not
// a failure); nothing gets a 500, and the replica keeps serving.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { parseWith, scheduleRequestSchema } from '@switchyard/protocol';
import { Agent, request } from 'undici';
import { SCHEDULE_REGRESSIONS, type ScheduleCase } from './regressions.ts';
import { FUZZ_SEED, describeFailures, runCases, startFuzzCluster, type FuzzCluster } from './support.ts';

const CASES = 10_000;
const PARALLEL = 16;
/** undici's request is several times cheaper per call than fetch, which keeps 10,000 cases within the time box. */
const agent = new Agent({ connections: PARALLEL });
let validCount = 0;

// Mostly well-formed values, so that a good share of bodies pass the schema
// and reach the pipeline; the rest probe the validation edges.
const ident = fc.oneof(
  { weight: 8, arbitrary: fc.stringMatching(/^[A-Za-z0-9._:@-]{1,24}$/) },
  { weight: 1, arbitrary: fc.constantFrom('demo', 'p1', 'r0', 'x'.repeat(128), 'x'.repeat(129), '') },
  { weight: 1, arbitrary: fc.string({ unit: fc.constantFrom(...'aZ09._:@-/ %é\u0000'.split('')), maxLength: 140 }) },
);
const rule = fc.record(
  {
    key: fc.oneof(ident, fc.constant('version')),
    op: fc.constantFrom('equal', 'not_equal', 'exists', 'latest_version', 'equal', 'bogus'),
    value: ident,
  },
  { requiredKeys: ['key', 'op'] },
);
const scheduleShaped = fc
  .record(
    {
      class: fc.oneof(fc.constant('demo'), ident),
      processId: ident,
      threadId: ident,
      sticky: fc.oneof({ weight: 9, arbitrary: fc.boolean() }, { weight: 1, arbitrary: fc.constant('yes') }),
      processSelector: fc.array(rule, { maxLength: 4 }),
      affinity: fc.array(rule, { maxLength: 4 }),
      loadBalance: fc.record(
        {
          replicasLimit: fc.oneof(fc.integer({ min: 1, max: 20 }), fc.integer({ min: -5, max: 20_000 }), fc.double()),
          sortBy: fc.oneof(fc.constantFrom('-weight', 'weight', '-sandboxes', 'sandboxes'), ident),
          chooseWeightBy: fc.oneof(fc.constantFrom('', 'weight', 'sandboxes'), ident),
        },
        { requiredKeys: [] },
      ),
      exclude: fc.oneof(fc.array(ident, { maxLength: 4 }), fc.array(ident, { minLength: 250, maxLength: 300 })),
      explain: fc.boolean(),
    },
    { requiredKeys: ['class', 'processId'] },
  )
  .chain((v) =>
    fc.oneof(
      { weight: 9, arbitrary: fc.constant<Record<string, unknown>>(v) },
      { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }).map((extra) => ({ ...v, extra })) },
    ),
  );

const caseArb: fc.Arbitrary<ScheduleCase> = fc.oneof(
  { weight: 5, arbitrary: scheduleShaped.map((v) => ({ body: JSON.stringify(v) })) },
  {
    weight: 3,
    arbitrary: fc
      .record(
        {
          processId: fc.stringMatching(/^[A-Za-z0-9._:@-]{1,24}$/),
          threadId: fc.stringMatching(/^[a-z0-9]{1,8}$/),
          sticky: fc.boolean(),
        },
        { requiredKeys: ['processId'] },
      )
      .map((v) => ({ body: JSON.stringify({ class: 'demo', ...v }) })),
  },
  { weight: 2, arbitrary: fc.json({ maxDepth: 4 }).map((body) => ({ body })) },
  {
    weight: 2,
    arbitrary: fc.uint8Array({ maxLength: 512 }).map((b) => ({ body: Buffer.from(b).toString('base64'), bytes: true })),
  },
  {
    weight: 1,
    arbitrary: fc
      .record({
        body: fc.string({ maxLength: 200 }),
        contentType: fc.constantFrom('text/plain', '', 'application/json; charset=latin1', 'multipart/form-data'),
      })
      .map((c) => c),
  },
);

/** What the property allows for one case; undefined when the answer is acceptable. */
async function check(url: string, c: ScheduleCase): Promise<string | undefined> {
  const payload = c.bytes ? Buffer.from(c.body, 'base64') : c.body;
  const res = await request(`${url}/api/schedule`, {
    method: 'POST',
    headers: { 'content-type': c.contentType ?? 'application/json' },
    body: payload,
    dispatcher: agent,
    headersTimeout: 10_000,
    bodyTimeout: 10_000,
  });
  const text = await res.body.text();
  let json: unknown;
  try {
    json = JSON.parse(c.bytes ? Buffer.from(c.body, 'base64').toString('utf8') : c.body);
  } catch {
    json = undefined;
  }
  const valid = json !== undefined && parseWith(scheduleRequestSchema, json).ok;
  if (valid) validCount++;
  if (!valid)
    return res.statusCode >= 400 && res.statusCode < 500
      ? undefined
      : `invalid body answered ${res.statusCode}: ${text.slice(0, 200)}`;
  if (res.statusCode === 200) return undefined;
  if (res.statusCode === 503 && text.includes('unschedulable')) return undefined;
  // A valid body with a content type other than JSON may be refused as a client error.
  if (c.contentType !== undefined && res.statusCode === 415) return undefined;
  return `valid body answered ${res.statusCode}: ${text.slice(0, 200)}`;
}

describe('fuzz: POST /api/schedule', () => {
  let cluster: FuzzCluster;
  before(async () => {
    cluster = await startFuzzCluster(2);
  });
  after(async () => {
    await agent.close();
    await cluster?.close();
  });

  for (const { note, input } of SCHEDULE_REGRESSIONS) {
    it(`regression: answers ${note} without a 5xx`, async () => {
      assert.equal(await check(cluster.replicas[0]!.url, input), undefined);
    });
  }

  it(`answers ${CASES} arbitrary bodies with a 4xx, a decision or "unschedulable", never a 500`, async () => {
    const cases = fc.sample(caseArb, { numRuns: CASES, seed: FUZZ_SEED });
    const started = performance.now();
    // Alternate replicas: one is the leader, the other schedules from a synced epoch.
    let n = 0;
    const failures = await runCases(cases, PARALLEL, (c) => check(cluster.replicas[n++ % 2]!.url, c));
    console.log(
      `fuzz schedule: ${cases.length} cases (${validCount} valid) in ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
    assert.equal(failures.length, 0, describeFailures(failures));
    await cluster.assertHealthy();
  });
});
