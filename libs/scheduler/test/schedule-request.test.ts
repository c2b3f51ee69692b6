// The hand-checked fast path of schedule bodies must answer exactly as the
// schema: same accept/reject, same value (defaults included), same message.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { parseWith, scheduleRequestSchema } from '@switchyard/protocol';
import { parseScheduleRequest } from '@switchyard/scheduler';

const bySchema = (body: unknown) => parseWith(scheduleRequestSchema, body);

describe('parseScheduleRequest', () => {
  const cases: ReadonlyArray<{ name: string; body: unknown }> = [
    { name: 'class and process only get sticky defaulted to true', body: { class: 'demo', processId: 'p1' } },
    { name: 'a thread id is kept', body: { class: 'demo', processId: 'p1', threadId: 't1' } },
    { name: 'sticky false is kept', body: { class: 'demo', processId: 'p1', sticky: false } },
    { name: 'a bad process id is refused with the schema message', body: { class: 'demo', processId: 'bad id' } },
    { name: 'a too long class is refused', body: { class: 'c'.repeat(129), processId: 'p' } },
    { name: 'a numeric thread id is refused', body: { class: 'demo', processId: 'p', threadId: 7 } },
    { name: 'a string sticky flag is refused', body: { class: 'demo', processId: 'p', sticky: 'yes' } },
    { name: 'an unknown key is refused', body: { class: 'demo', processId: 'p', extra: 1 } },
    { name: 'a missing class is refused', body: { processId: 'p' } },
    { name: 'an array body is refused', body: [{ class: 'demo', processId: 'p' }] },
    { name: 'null is refused', body: null },
    { name: 'a string body is refused', body: 'demo' },
    {
      name: 'the slow fields still parse (affinity, load balance, exclude, explain)',
      body: {
        class: 'demo',
        processId: 'p',
        affinity: [{ key: 'zone', op: 'equal', value: 'a' }],
        loadBalance: { replicasLimit: 2 },
        exclude: ['r1'],
        explain: true,
      },
    },
    {
      name: 'a JSON __proto__ key is not taken as the prototype',
      body: JSON.parse('{"class":"demo","processId":"p","__proto__":{"x":1}}'),
    },
  ];
  for (const { name, body } of cases) {
    it(`answers as the schema: ${name}`, () => {
      assert.deepEqual(parseScheduleRequest(body), bySchema(body));
    });
  }

  it('answers as the schema for generated bodies near the fast path', () => {
    const identity = fc.oneof(
      fc.stringMatching(/^[A-Za-z0-9._:@-]{1,12}$/),
      fc.string({ maxLength: 6 }),
      fc.integer(),
      fc.constant(undefined),
    );
    const body = fc.record(
      {
        class: identity,
        processId: identity,
        threadId: identity,
        sticky: fc.oneof(fc.boolean(), fc.string(), fc.constant(null)),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(body, (b) => {
        assert.deepEqual(parseScheduleRequest(b), bySchema(b));
      }),
      { numRuns: 2000 },
    );
  });
});
