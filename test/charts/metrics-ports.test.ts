// Where the gateway and scheduler charts serve /metrics and liveness,
// rendered with the real helm binary: the ServiceMonitor selecting one
// Service, and metricsPort, a listener of its own that a flood on the main
// port cannot hold full.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Deployment, StatefulSet } from 'kubernetes-models/apps/v1';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import { chartRenderer, type Manifest } from './helm.ts';
import { podOf } from './manifests.ts';

const { skip, render } = chartRenderer('chart metrics port tests');

// Prometheus Operator: each ServiceMonitor selects exactly one of its
// chart's Services (the scheduler's two would scrape every replica twice)
// and scrapes /metrics on a port that Service has.
for (const chart of ['gateway', 'scheduler']) {
  describe(`charts/${chart}: serviceMonitor`, { skip }, () => {
    type Labelled = Manifest & { metadata: { labels?: Record<string, string> } };
    type MonitorSpec = {
      selector: { matchLabels: Record<string, string> };
      endpoints: { port: string; path: string; interval: string }[];
    };

    it('renders none by default', async () => {
      assert.equal((await render(chart)).filter((m) => m.kind === 'ServiceMonitor').length, 0);
    });

    it('selects one Service and scrapes /metrics on its port, with the labels the operator looks for', async () => {
      const manifests = (await render(chart, `test/charts/values-production-${chart}.yaml`)) as Labelled[];
      const monitors = manifests.filter((m) => m.kind === 'ServiceMonitor');
      assert.equal(monitors.length, 1);
      const monitor = monitors[0]!;
      assert.equal(monitor.metadata.labels?.release, 'prometheus');
      const spec = monitor.spec as MonitorSpec;
      const selected = manifests.filter(
        (m) =>
          m.kind === 'Service' &&
          Object.entries(spec.selector.matchLabels).every(([k, v]) => m.metadata.labels?.[k] === v),
      );
      assert.equal(selected.length, 1, selected.map((m) => m.metadata.name).join(','));
      const ports = (selected[0]!.spec as { ports: { name: string }[] }).ports.map((p) => p.name);
      assert.deepEqual(
        spec.endpoints.map((e) => ({ path: e.path, known: ports.includes(e.port) })),
        [{ path: '/metrics', known: true }],
      );
      assert.equal(spec.endpoints[0]!.interval, chart === 'scheduler' ? '15s' : '30s');
    });

    it('refuses an interval Prometheus would not take', async () => {
      await assert.rejects(
        render(chart, undefined, ['serviceMonitor.enabled=true', 'serviceMonitor.interval=30 seconds']),
        /serviceMonitor\.interval/,
      );
    });
  });
}

type Port = { name: string; port?: number; containerPort?: number };
/** A container as the metrics-port checks read it: its env, ports and probes. */
type Probed = { env?: { name: string; value?: string }[]; ports: Port[] } & Record<
  string,
  { httpGet: { path: string; port: string; scheme: string } }
>;

/**
 * `container` serves /metrics and liveness on a port of its own, `port` (named
 * `metrics`, and told the app), and readiness on `http` in `readinessScheme`.
 */
function assertMetricsPort(container: Probed, port: number, readinessScheme: 'HTTP' | 'HTTPS'): void {
  assert.deepEqual(
    container.ports.find((p) => p.name === 'metrics'),
    { name: 'metrics', containerPort: port },
  );
  assert.equal(container.env?.find((e) => e.name === 'SWITCHYARD_METRICS_PORT')?.value, String(port));
  assert.deepEqual(container.livenessProbe!.httpGet, { path: '/healthz', port: 'metrics', scheme: 'HTTP' });
  assert.deepEqual(container.readinessProbe!.httpGet, { path: '/readyz', port: 'http', scheme: readinessScheme });
}

// metricsPort, on by default: /metrics on a port of its own, behind a
// ClusterIP Service of its own, so that a LoadBalancer Service for /mcp does
// not publish it, and the liveness probe there, so that a flood holding the
// /mcp port full (connectionsMax) does not get the pod restarted.
describe('charts/gateway: metricsPort', { skip }, () => {
  type Labelled = Manifest & { metadata: { labels?: Record<string, string> } };
  const services = (manifests: Manifest[]): Labelled[] => manifests.filter((m) => m.kind === 'Service');
  const portsOf = (service: Manifest): string[] => (service.spec as { ports: Port[] }).ports.map((p) => p.name);
  const containerOf = (manifests: Manifest[]): Probed =>
    podOf(manifests.find((m) => m.kind === 'Deployment')!).containers[0]! as unknown as Probed;

  it('serves /metrics and liveness on 8081 by default, behind a metrics Service, with readiness on /mcp', async () => {
    const manifests = await render('gateway', undefined, ['serviceMonitor.enabled=true']);
    const container = containerOf(manifests);
    assertMetricsPort(container, 8081, 'HTTP');
    assert.deepEqual(
      services(manifests).map((s) => [s.metadata.name, portsOf(s)]),
      [
        ['sy-gateway-metrics', ['metrics']],
        ['sy-gateway', ['http']],
      ],
    );
    const monitor = manifests.find((m) => m.kind === 'ServiceMonitor')!;
    assert.equal((monitor.spec as { endpoints: { port: string }[] }).endpoints[0]!.port, 'metrics');
  });

  it('keeps /metrics and liveness on the /mcp port when null, with no Service of its own', async () => {
    const manifests = await render('gateway', undefined, ['metricsPort=null', 'serviceMonitor.enabled=true']);
    assert.deepEqual(services(manifests).map(portsOf), [['http']]);
    const container = containerOf(manifests);
    assert.deepEqual(
      container.ports.map((p) => p.name),
      ['http'],
    );
    assert.equal(
      container.env?.some((e) => e.name === 'SWITCHYARD_METRICS_PORT'),
      false,
    );
    assert.deepEqual(container.livenessProbe!.httpGet, { path: '/healthz', port: 'http', scheme: 'HTTP' });
    const monitor = manifests.find((m) => m.kind === 'ServiceMonitor')!;
    new ServiceMonitor(monitor as never).validate();
    const spec = monitor.spec as { selector: { matchLabels: Record<string, string> }; endpoints: { port: string }[] };
    assert.equal(spec.endpoints[0]!.port, 'http');
    assert.equal(spec.selector.matchLabels['app.kubernetes.io/component'], undefined);
  });

  it('serves it on a ClusterIP Service of its own, which alone the ServiceMonitor scrapes, in plain HTTP', async () => {
    const set = ['metricsPort=9090', 'service.type=LoadBalancer', 'serviceMonitor.enabled=true'];
    const manifests = (await render('gateway', undefined, [...set, 'tls.existingSecret=own-tls'])) as Labelled[];
    const [mcp, metrics] = [
      services(manifests).find((s) => portsOf(s).includes('http'))!,
      services(manifests).find((s) => portsOf(s).includes('metrics'))!,
    ];
    assert.deepEqual(portsOf(mcp), ['http'], 'the published Service has no metrics port');
    assert.equal((mcp.spec as { type: string }).type, 'LoadBalancer');
    assert.equal((metrics.spec as { type: string }).type, 'ClusterIP');
    assert.equal(metrics.metadata.name, 'sy-gateway-metrics');
    const deployment = manifests.find((m) => m.kind === 'Deployment')!;
    new Deployment(deployment as never).validate();
    const container = podOf(deployment).containers[0]! as unknown as {
      env?: { name: string; value?: string }[];
      ports: Port[];
    };
    assert.deepEqual(
      container.ports.find((p) => p.name === 'metrics'),
      { name: 'metrics', containerPort: 9090 },
    );
    assert.equal(container.env?.find((e) => e.name === 'SWITCHYARD_METRICS_PORT')?.value, '9090');
    // A flood holding the /mcp port full (connectionsMax) must not fail liveness, or the pod restarts.
    const probes = container as unknown as Record<string, { httpGet: { port: string; scheme: string } }>;
    assert.deepEqual(probes.livenessProbe!.httpGet, { path: '/healthz', port: 'metrics', scheme: 'HTTP' });
    assert.equal(probes.readinessProbe!.httpGet.port, 'http', 'readiness still says whether /mcp takes clients');
    const monitor = manifests.find((m) => m.kind === 'ServiceMonitor')!;
    new ServiceMonitor(monitor as never).validate();
    const spec = monitor.spec as {
      selector: { matchLabels: Record<string, string> };
      endpoints: Record<string, unknown>[];
    };
    const selected = services(manifests).filter((s) =>
      Object.entries(spec.selector.matchLabels).every(([k, v]) => s.metadata.labels?.[k] === v),
    );
    assert.deepEqual(
      selected.map((s) => s.metadata.name),
      ['sy-gateway-metrics'],
    );
    assert.equal(spec.endpoints[0]!.port, 'metrics');
    assert.equal(spec.endpoints[0]!.scheme, undefined, 'the metrics port serves plain HTTP even where /mcp serves TLS');
  });

  it('refuses a metricsPort that is no port', async () => {
    await assert.rejects(render('gateway', undefined, ['metricsPort=70000']), /metricsPort/);
  });

  // A release that had set port 8081 while metricsPort was off by default would otherwise render two listeners
  // on one port: every pod crash-looping on the second bind.
  it('refuses port and metricsPort the same, naming both', async () => {
    await assert.rejects(render('gateway', undefined, ['port=8081']), /metricsPort \(8081\) .*port/);
    await assert.rejects(render('gateway', undefined, ['port=9090', 'metricsPort=9090']), /metricsPort \(9090\)/);
    await render('gateway', undefined, ['port=8081', 'metricsPort=null']);
  });
});

// The scheduler's metricsPort, on by default: a replica has one port, which a
// flood can hold full (connectionsMax); liveness and scrapes go to a listener
// of its own, readiness stays with the port it speaks for.
describe('charts/scheduler: metricsPort', { skip }, () => {
  const portsOf = (service: Manifest): string[] => (service.spec as { ports: Port[] }).ports.map((p) => p.name);

  it('probes liveness and scrapes /metrics on it in plain HTTP, even with tls, and admits it in the NetworkPolicy', async () => {
    const set = ['serviceMonitor.enabled=true', 'tls.existingSecret=own-tls', 'networkPolicy.enabled=true'];
    const manifests = await render('scheduler', undefined, set);
    const statefulSet = manifests.find((m) => m.kind === 'StatefulSet')!;
    new StatefulSet(statefulSet as never).validate();
    const container = podOf(statefulSet).containers[0]! as unknown as Probed;
    assertMetricsPort(container, 7071, 'HTTPS');
    const monitor = manifests.find((m) => m.kind === 'ServiceMonitor')!;
    new ServiceMonitor(monitor as never).validate();
    const endpoint = (monitor.spec as { endpoints: Record<string, unknown>[] }).endpoints[0]!;
    assert.deepEqual(endpoint, { port: 'metrics', path: '/metrics', interval: '30s' });
    const peers = manifests.find((m) => m.kind === 'Service' && m.metadata.name === 'sy-scheduler-peers')!;
    assert.deepEqual(portsOf(peers), ['http', 'metrics'], 'the Service the ServiceMonitor selects has the port');
    const policy = manifests.find((m) => m.kind === 'NetworkPolicy')!;
    const ports = (policy.spec as { ingress: { ports: { port: string }[] }[] }).ingress[0]!.ports.map((p) => p.port);
    assert.deepEqual(ports, ['http', 'metrics']);
  });

  it('leaves probes and scrapes on the replica port when null, and refuses one that is no port', async () => {
    const manifests = await render('scheduler', undefined, ['metricsPort=null', 'serviceMonitor.enabled=true']);
    const container = podOf(manifests.find((m) => m.kind === 'StatefulSet')!).containers[0]! as unknown as Probed;
    assert.deepEqual(
      container.ports.map((p) => p.name),
      ['http'],
    );
    assert.equal(
      container.env?.some((e) => e.name === 'SWITCHYARD_METRICS_PORT'),
      false,
    );
    assert.equal(container.livenessProbe!.httpGet.port, 'http');
    const monitor = manifests.find((m) => m.kind === 'ServiceMonitor')!;
    assert.equal((monitor.spec as { endpoints: { port: string }[] }).endpoints[0]!.port, 'http');
    await assert.rejects(render('scheduler', undefined, ['metricsPort=70000']), /metricsPort/);
  });

  it('refuses port and metricsPort the same, naming both', async () => {
    await assert.rejects(render('scheduler', undefined, ['port=7071']), /metricsPort \(7071\) .*port/);
    await render('scheduler', undefined, ['port=7071', 'metricsPort=null']);
  });
});
