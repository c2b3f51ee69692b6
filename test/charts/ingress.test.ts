// The gateway and scheduler charts' Ingress, rendered with the real helm
// binary: off by default, and when on, only the paths outside clients need,
// routed to the Service every ready replica sits behind.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1';
import { CONNECT_PATH } from '@switchyard/tunnel';
import { chartRenderer, type Manifest } from './helm.ts';

const { skip, render } = chartRenderer('chart ingress tests');

// Each Ingress lets in from outside the cluster exactly what outside clients
// need: MCP clients /mcp and its OAuth metadata (the gateway), runtimes the tunnel's connect path
// (the scheduler, whose other endpoints have no authentication of their own).
const INGRESSES = [
  {
    chart: 'gateway',
    host: 'mcp.example.com',
    paths: [
      { path: '/mcp', pathType: 'Prefix' },
      // What MCP clients discover authorization servers from (auth mode jwt).
      { path: '/.well-known/oauth-protected-resource', pathType: 'Prefix' },
    ],
  },
  { chart: 'scheduler', host: 'scheduler.example.com', paths: [{ path: CONNECT_PATH, pathType: 'Exact' }] },
];
type IngressSpec = {
  ingressClassName?: string;
  tls?: { secretName: string; hosts: string[] }[];
  rules: {
    host?: string;
    http: {
      paths: { path: string; pathType: string; backend: { service: { name: string; port: { name: string } } } }[];
    };
  }[];
};
for (const c of INGRESSES) {
  describe(`charts/${c.chart}: ingress`, { skip }, () => {
    it('renders none by default', async () => {
      assert.equal((await render(c.chart)).filter((m) => m.kind === 'Ingress').length, 0);
    });

    it(`routes only ${c.paths.map((p) => p.path).join(', ')} to the Service, per host, with the certificates given`, async () => {
      const manifests = await render(c.chart, `test/charts/values-production-${c.chart}.yaml`);
      const ingresses = manifests.filter((m) => m.kind === 'Ingress');
      assert.equal(ingresses.length, 1);
      const spec = ingresses[0]!.spec as IngressSpec;
      assert.equal(spec.ingressClassName, 'nginx');
      assert.deepEqual(spec.tls, [{ secretName: `${c.host.replaceAll('.', '-')}`, hosts: [c.host] }]);
      // The backend is the Service every ready replica sits behind (not the scheduler's headless one, nor
      // the gateway's metrics Service).
      type Labelled = Manifest & { metadata: { labels?: Record<string, string> } };
      const service = (manifests as Labelled[]).find(
        (m) =>
          m.kind === 'Service' &&
          !(m.spec as { clusterIP?: string }).clusterIP &&
          m.metadata.labels?.['app.kubernetes.io/component'] !== 'metrics',
      )!;
      const ports = (service.spec as { ports: { name: string }[] }).ports.map((p) => p.name);
      assert.deepEqual(
        spec.rules.map((r) => ({
          host: r.host,
          paths: r.http.paths.map((p) => ({ path: p.path, pathType: p.pathType })),
          backends: r.http.paths.map((p) => p.backend.service.name),
        })),
        [{ host: c.host, paths: c.paths, backends: c.paths.map(() => service.metadata.name) }],
      );
      for (const p of spec.rules[0]!.http.paths) assert.ok(ports.includes(p.backend.service.port.name));
    });

    it('routes every host when none is given', async () => {
      const ingress = (await render(c.chart, undefined, ['ingress.enabled=true'])).find((m) => m.kind === 'Ingress')!;
      new Ingress(ingress as never).validate();
      const spec = ingress.spec as IngressSpec;
      assert.equal(spec.rules.length, 1);
      assert.equal(spec.rules[0]!.host, undefined);
      assert.equal(spec.tls, undefined);
    });

    // Kubernetes takes only strings there; a bare number would fail the install later, less clearly.
    it('refuses an annotation value that is not a string', async () => {
      await assert.rejects(
        render(c.chart, undefined, ['ingress.enabled=true', 'ingress.annotations.example\\.com/timeout=3600']),
        /ingress\.annotations\.example\.com\/timeout: Invalid type. Expected: string/,
      );
    });
  });
}
