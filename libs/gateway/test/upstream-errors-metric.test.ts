// `upstream_errors_total{reason}` has a series for every reason of its fixed
// set from the start, at 0, so that a rate over any reason (and the chart's
// SwitchyardGatewayUpstreamErrors) has something to work on before the first
// failure, and a dashboard shows 0 rather than no data. A failure moves its
// own reason only. Real runtimes behind the scheduler double; the counter
// read from the registry's text output, as a scrape would.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { UPSTREAM_ERROR_REASONS } from '@switchyard/gateway';
import { connectV2, startHarness, textOf, type Harness } from './harness.ts';
import { countsByReason, PREFIX } from './fixtures/refusals.ts';

const NAME = `${PREFIX}upstream_errors_total`;
const allZero = (): Record<string, number> => Object.fromEntries(UPSTREAM_ERROR_REASONS.map((r) => [r, 0]));

describe('upstream_errors_total of a gateway', () => {
  const registry = new Registry();
  let h: Harness;
  before(async () => {
    h = await startHarness(1, { upstreamCheckIntervalMs: 0, metrics: { registry, prefix: PREFIX } });
  });
  after(() => h.close());

  it('exports each reason of its fixed set from 0 before any failure, and no other', async () => {
    assert.equal(h.gateway.stats().upstreamErrors, 0);
    assert.deepEqual(await countsByReason(registry, NAME), allZero());
  });

  it('counts a runtime that refuses connections as connect, and moves no other reason', async () => {
    const live = h.scheduler.runtimes;
    h.scheduler.runtimes = [{ id: 'rt-dead', address: 'http://127.0.0.1:1' }, ...live];
    h.scheduler.preferred = 'rt-dead';
    try {
      // The initialize is placed on rt-dead, fails to dial, and is placed again on the live runtime.
      const client = await connectV2(h.url);
      try {
        assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { text: 'x' } })), 'x');
      } finally {
        await client.close();
      }
    } finally {
      h.scheduler.runtimes = live;
      h.scheduler.preferred = undefined;
    }
    assert.equal(h.gateway.stats().upstreamErrors, 1);
    assert.deepEqual(await countsByReason(registry, NAME), { ...allZero(), connect: 1 });
  });
});
