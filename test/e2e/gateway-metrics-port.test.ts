// A gateway given metricsPort serves /metrics there, plain HTTP, and no
// longer on its /mcp port, which a Service or front may publish. A gateway
// process; its scheduler is never reached.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnApp } from '../support/processes.ts';

const BASE = ['--host', '127.0.0.1', '--port', '0', '--schedulers', 'http://127.0.0.1:1'];

describe('a gateway with metricsPort', () => {
  it('serves /metrics on that port only, and names it on its ready line', async () => {
    const gateway = await spawnApp('gateway', 'gw-metrics-port', [...BASE, '--metrics-port', '0']);
    try {
      const ready = await gateway.waitForLog((l) => l.msg === 'ready');
      const metricsUrl = String(ready.metrics);
      assert.match(metricsUrl, /^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
      const scraped = await fetch(metricsUrl);
      assert.equal(scraped.status, 200);
      assert.match(await scraped.text(), /^# TYPE switchyard_gateway_requests_total counter$/m);
      const onMcpPort = await fetch(`http://127.0.0.1:${gateway.port}/metrics`);
      assert.equal(onMcpPort.status, 404, 'the /mcp port keeps /metrics to itself');
      await onMcpPort.text();
      const mcpOnMetricsPort = await fetch(new URL('/mcp', metricsUrl), { method: 'POST', body: '{}' });
      assert.equal(mcpOnMetricsPort.status, 404, 'the metrics port serves nothing else');
      await mcpOnMetricsPort.text();
      assert.equal((await fetch(`http://127.0.0.1:${gateway.port}/healthz`)).status, 200, 'probes stay');
    } finally {
      await gateway.stop();
    }
  });

  it('serves /metrics on the /mcp port when unset', async () => {
    const gateway = await spawnApp('gateway', 'gw-metrics-same-port', BASE);
    try {
      const ready = await gateway.waitForLog((l) => l.msg === 'ready');
      assert.equal(ready.metrics, undefined);
      const scraped = await fetch(`http://127.0.0.1:${gateway.port}/metrics`);
      assert.equal(scraped.status, 200);
      assert.match(await scraped.text(), /^# TYPE switchyard_gateway_requests_total counter$/m);
    } finally {
      await gateway.stop();
    }
  });
});
