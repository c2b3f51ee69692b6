// How `POST /api/schedule` reads its body: size limit (declared or streamed),
// malformed JSON, and a valid body on the same keep-alive connection after a
// refusal. Guards the event-based body reader that replaced stream iteration.
// How an unschedulable request is logged: unschedulable-log.test.ts.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { MemoryLeaseStore } from '@switchyard/election';
import { startReplicas, until } from './support.ts';

const BODY_BYTES_MAX = 64 * 1024;

describe('POST /api/schedule body handling', () => {
  let replica: SchedulerReplica;
  before(async () => {
    replica = (await startReplicas(1, new MemoryLeaseStore()))[0]!;
    await until('an epoch', async () => {
      const res = await fetch(`${replica.url}/api/epoch`);
      return ((await res.json()) as { epoch: number | null }).epoch !== null || undefined;
    });
  });
  after(() => replica?.close());

  const big = JSON.stringify({ class: 'demo', processId: 'p', pad: 'x'.repeat(BODY_BYTES_MAX) });
  const cases: ReadonlyArray<{ name: string; body: () => BodyInit; status: number; code: string }> = [
    { name: 'a body that is not JSON is a 400 parse_error', body: () => '{"class":', status: 400, code: 'parse_error' },
    {
      name: 'a body declared larger than the limit is a 413',
      body: () => big,
      status: 413,
      code: 'body_too_large',
    },
    {
      name: 'a streamed body (no length) that grows past the limit is a 413',
      body: () =>
        Readable.toWeb(Readable.from([Buffer.from(big.slice(0, 1000)), Buffer.from(big.slice(1000))])) as BodyInit,
      status: 413,
      code: 'body_too_large',
    },
    {
      name: 'a body in several chunks is joined before parsing (no runtime: 503 unschedulable)',
      body: () =>
        Readable.toWeb(
          Readable.from([Buffer.from('{"class":"demo",'), Buffer.from('"processId":"p-chunks"}')]),
        ) as BodyInit,
      status: 503,
      code: 'unschedulable',
    },
    {
      name: 'a schema violation is a 400 invalid_request naming the field',
      body: () => '{"class":"demo","processId":"bad id"}',
      status: 400,
      code: 'invalid_request',
    },
  ];
  for (const { name, body, status, code } of cases) {
    it(name, async () => {
      const res = await fetch(`${replica.url}/api/schedule`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: body(),
        duplex: 'half',
      } as RequestInit);
      const answer = (await res.json()) as { code?: string; unschedulable?: { code: string } };
      assert.equal(res.status, status);
      if (code === 'unschedulable') assert.ok(answer.unschedulable, JSON.stringify(answer));
      else assert.equal(answer.code, code);
    });
  }
});
