// TLS in the charts, rendered with the real helm binary: the scheduler and
// gateway serving it themselves from a Secret (probes and scrapes in HTTPS),
// and the gateway and runtime trusting a private CA (trustedCA) to dial
// schedulers that serve it.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Deployment, StatefulSet } from 'kubernetes-models/apps/v1';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import { chartRenderer } from './helm.ts';

const { skip, render } = chartRenderer('chart TLS tests');

// Scheduler and gateway serving TLS themselves: a kubernetes.io/tls Secret
// mounted read-only, the app pointed at it, probes and scrapes in HTTPS;
// replicas advertise to peers a name the certificate can carry.
type TlsPod = {
  containers: {
    env?: { name: string; value?: string }[];
    volumeMounts?: Record<string, unknown>[];
    livenessProbe: { httpGet: { scheme?: string } };
    readinessProbe: { httpGet: { scheme?: string } };
  }[];
  volumes?: { name: string; secret?: { secretName: string } }[];
};

/** The chart's workload pod, its env by name and its ServiceMonitor endpoint, both validated. */
async function renderedForTls(chart: 'scheduler' | 'gateway', set: readonly string[] = []) {
  const manifests = await render(chart, undefined, ['serviceMonitor.enabled=true', ...set]);
  const workload = manifests.find((m) => m.kind === (chart === 'scheduler' ? 'StatefulSet' : 'Deployment'))!;
  new (chart === 'scheduler' ? StatefulSet : Deployment)(workload as never).validate();
  const monitor = manifests.find((m) => m.kind === 'ServiceMonitor')!;
  new ServiceMonitor(monitor as never).validate();
  const pod = (workload.spec as { template: { spec: TlsPod } }).template.spec;
  const env = new Map((pod.containers[0]!.env ?? []).map((e) => [e.name, e.value]));
  const endpoint = (monitor.spec as { endpoints: Record<string, unknown>[] }).endpoints[0]!;
  return { pod, env, endpoint };
}

for (const chart of ['scheduler', 'gateway'] as const) {
  describe(`charts/${chart}: tls`, { skip }, () => {
    it('serves plain HTTP by default', async () => {
      const { pod, env, endpoint } = await renderedForTls(chart);
      assert.equal(env.has('SWITCHYARD_TLS_CERT_FILE'), false);
      assert.equal(pod.containers[0]!.livenessProbe.httpGet.scheme, 'HTTP');
      assert.equal(
        pod.volumes?.some((v) => v.name === 'tls'),
        false,
      );
      assert.equal(endpoint.scheme, undefined);
      if (chart === 'scheduler') assert.equal(env.get('SWITCHYARD_ADVERTISE_URL'), 'http://$(POD_IP):7070');
    });

    it('mounts the Secret read-only, points the app at it, and probes and scrapes in HTTPS', async () => {
      const extra =
        chart === 'scheduler'
          ? ['trustedCA.existingConfigMap=corp-ca']
          : ['serviceMonitor.tlsConfig.serverName=mcp.example.com'];
      // metricsPort (on by default) takes liveness and scrapes in plain HTTP; see each chart's own test.
      const own = ['metricsPort=null'];
      const { pod, env, endpoint } = await renderedForTls(chart, ['tls.existingSecret=own-tls', ...extra, ...own]);
      const container = pod.containers[0]!;
      assert.equal(env.get('SWITCHYARD_TLS_CERT_FILE'), '/etc/switchyard/tls/tls.crt');
      assert.equal(env.get('SWITCHYARD_TLS_KEY_FILE'), '/etc/switchyard/tls/tls.key');
      assert.deepEqual(
        container.volumeMounts?.find((v) => v.name === 'tls'),
        { name: 'tls', mountPath: '/etc/switchyard/tls', readOnly: true },
      );
      assert.deepEqual(
        pod.volumes?.find((v) => v.name === 'tls'),
        { name: 'tls', secret: { secretName: 'own-tls' } },
      );
      assert.equal(container.livenessProbe.httpGet.scheme, 'HTTPS');
      assert.equal(container.readinessProbe.httpGet.scheme, 'HTTPS');
      assert.equal(endpoint.scheme, 'https');
      if (chart === 'gateway') return assert.deepEqual(endpoint.tlsConfig, { serverName: 'mcp.example.com' });
      const advertised = 'https://$(SWITCHYARD_REPLICA_ID).sy-scheduler-peers.switchyard.svc:7070';
      assert.equal(env.get('SWITCHYARD_ADVERTISE_URL'), advertised);
      const names = (container.env ?? []).map((e) => e.name);
      assert.ok(
        names.indexOf('SWITCHYARD_REPLICA_ID') < names.indexOf('SWITCHYARD_ADVERTISE_URL'),
        'defined before use',
      );
      assert.equal(env.get('NODE_EXTRA_CA_CERTS'), '/etc/switchyard/ca/ca.crt');
      assert.deepEqual(endpoint.tlsConfig, {
        serverName: 'sy-scheduler-0.sy-scheduler-peers.switchyard.svc',
        ca: { configMap: { name: 'corp-ca', key: 'ca.crt' } },
      });
    });
  });
}

// Both dial schedulers, which may sit behind TLS with a private CA.
for (const chart of ['gateway', 'runtime']) {
  describe(`charts/${chart}: trustedCA`, { skip }, () => {
    type Pod = {
      containers: { env?: { name: string; value?: string }[]; volumeMounts?: Record<string, unknown>[] }[];
      volumes?: { name: string; configMap?: { name: string } }[];
    };
    const podWith = async (set: readonly string[] = []): Promise<Pod> => {
      const workload = (await render(chart, undefined, set)).find((m) => m.kind === 'Deployment')!;
      new Deployment(workload as never).validate();
      return (workload.spec as { template: { spec: Pod } }).template.spec;
    };

    it('mounts the ConfigMap and points NODE_EXTRA_CA_CERTS at its key; sets neither by default', async () => {
      const pod = await podWith(['trustedCA.existingConfigMap=corp-ca', 'trustedCA.key=bundle.pem']);
      const container = pod.containers[0]!;
      assert.equal(
        container.env?.find((e) => e.name === 'NODE_EXTRA_CA_CERTS')?.value,
        '/etc/switchyard/ca/bundle.pem',
      );
      assert.deepEqual(
        container.volumeMounts?.find((v) => v.name === 'trusted-ca'),
        { name: 'trusted-ca', mountPath: '/etc/switchyard/ca', readOnly: true },
      );
      assert.deepEqual(
        pod.volumes?.find((v) => v.name === 'trusted-ca'),
        {
          name: 'trusted-ca',
          configMap: { name: 'corp-ca' },
        },
      );
      const plain = await podWith();
      assert.equal(
        plain.containers[0]!.env?.some((e) => e.name === 'NODE_EXTRA_CA_CERTS'),
        false,
      );
      assert.equal(
        plain.volumes?.some((v) => v.name === 'trusted-ca'),
        false,
      );
    });

    it('refuses an empty key', async () => {
      await assert.rejects(podWith(['trustedCA.existingConfigMap=corp-ca', 'trustedCA.key=']), /key/);
    });
  });
}
