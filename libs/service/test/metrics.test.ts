import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { createMetrics, listen, metricsHandler } from '@switchyard/service';

describe('createMetrics', () => {
  const gateway = createMetrics('gateway');
  const requests = gateway.counter({ name: 'requests_total', help: 'Requests.', labelNames: ['status'] });
  gateway.gauge({ name: 'sessions', help: 'Sessions.' }).set(3);
  gateway.histogram({ name: 'schedule_seconds', help: 'Latency.', buckets: [0.01, 0.1] }).observe(0.05);
  requests.inc({ status: '200' });
  const server = createServer(metricsHandler(gateway.registry));
  after(() => server.close());

  it('serves every metric, default ones included, under switchyard_<app>_', async () => {
    const { port } = await listen(server, { host: '127.0.0.1', port: 0 });
    const res = await fetch(`http://127.0.0.1:${port}/metrics`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
    const text = await res.text();
    assert.match(text, /^switchyard_gateway_requests_total\{status="200"\} 1$/m);
    assert.match(text, /^switchyard_gateway_sessions 3$/m);
    assert.match(text, /^switchyard_gateway_schedule_seconds_bucket\{le="0.1"\} 1$/m);
    assert.match(text, /^switchyard_gateway_process_cpu_user_seconds_total /m);
    const samples = text.split('\n').filter((l) => l !== '' && !l.startsWith('#'));
    assert.ok(samples.length > 10);
    for (const line of samples) assert.ok(line.startsWith('switchyard_gateway_'), line);
  });

  it('keeps registries of different apps apart in one process', async () => {
    const scheduler = createMetrics('scheduler');
    scheduler.counter({ name: 'requests_total', help: 'Requests.' });
    const text = await scheduler.registry.metrics();
    assert.ok(!text.includes('switchyard_gateway_'));
    assert.match(text, /^switchyard_scheduler_requests_total 0$/m);
  });

  const badNames = ['Requests', 'switchyard_gateway_x', 'a-b', ''];
  for (const name of badNames) {
    it(`refuses the metric name '${name}'`, () => {
      assert.throws(() => gateway.counter({ name, help: 'x' }), TypeError);
    });
  }
});
