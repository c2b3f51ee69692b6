import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
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

  it('records an event-loop stall in the lag histogram', async () => {
    const runtime = createMetrics('runtime');
    await sleep(250);
    const stalledUntil = performance.now() + 300;
    while (performance.now() < stalledUntil) {
      // Holds the event loop, as a long synchronous task would.
    }
    await sleep(250);
    const text = await runtime.registry.metrics();
    const max = Number(/^switchyard_runtime_nodejs_eventloop_lag_max_seconds (\S+)$/m.exec(text)?.[1]);
    assert.ok(max >= 0.2, `largest lag seen: ${max} s`);
  });

  it('wakes an idle process about ten times a second, not a hundred', async () => {
    // A process holding nothing but the metrics (and one far-off timer, to stay up):
    // each time its main thread blocks and is woken counts as a voluntary context switch.
    const code =
      "import { createMetrics } from '@switchyard/service'; createMetrics('runtime'); setInterval(() => {}, 60_000);";
    const child = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: 'ignore' });
    try {
      const switches = (): number =>
        Number(/^voluntary_ctxt_switches:\s+(\d+)$/m.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1]);
      await sleep(1500);
      const before = switches();
      await sleep(2000);
      const perSecond = (switches() - before) / 2;
      console.log(`# an idle process with the metrics woke ${perSecond} times a second`);
      assert.ok(perSecond < 40, `${perSecond} wake-ups a second`);
    } finally {
      child.kill();
      await once(child, 'exit');
    }
  });

  it('reads a labelled gauge at each scrape, one sample per label set, those left out dropped', async () => {
    const runtime = createMetrics('runtime');
    let reading = [
      { labels: { class: 'demo' }, value: 2 },
      { labels: { class: 'child' }, value: 0 },
    ];
    runtime.gauge({ name: 'by_class', help: 'Read.', labelNames: ['class'], collect: () => reading });
    runtime.gauge({ name: 'by_class_later', help: 'Awaited.', labelNames: ['class'], collect: async () => reading });
    for (const name of ['by_class', 'by_class_later']) {
      const text = await runtime.registry.metrics();
      assert.match(text, new RegExp(`^switchyard_runtime_${name}\\{class="demo"\\} 2$`, 'm'));
      assert.match(text, new RegExp(`^switchyard_runtime_${name}\\{class="child"\\} 0$`, 'm'));
    }
    reading = [{ labels: { class: 'child' }, value: 1 }];
    const text = await runtime.registry.metrics();
    assert.doesNotMatch(text, /class="demo"/);
    assert.match(text, /^switchyard_runtime_by_class\{class="child"\} 1$/m);
    assert.match(text, /^switchyard_runtime_by_class_later\{class="child"\} 1$/m);
  });

  const badNames = ['Requests', 'switchyard_gateway_x', 'a-b', ''];
  for (const name of badNames) {
    it(`refuses the metric name '${name}'`, () => {
      assert.throws(() => gateway.counter({ name, help: 'x' }), TypeError);
    });
  }
});
