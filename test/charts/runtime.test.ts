// The runtime chart, rendered with the real helm binary: its health port and
// PodMonitor, the shared process namespace, metering, HOME and tunnel
// transport, and config file changes rolling the pods.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { chartRenderer, type Manifest } from './helm.ts';
import { podOf, type PodSpec } from './manifests.ts';

const { skip, render } = chartRenderer('runtime chart tests');

// Runtimes have no Service: a PodMonitor scrapes each pod on the health
// port the probes use.
describe('charts/runtime: health port and podMonitor', { skip }, () => {
  type Container = {
    ports?: { name: string; containerPort: number }[];
    env?: { name: string; value?: string }[];
    livenessProbe?: { httpGet: { port: string } };
    readinessProbe?: { httpGet: { port: string } };
  };
  const containerOf = (manifests: Manifest[]): Container =>
    podOf(manifests.find((m) => m.kind === 'Deployment' || m.kind === 'DaemonSet')!).containers[0] as Container;

  it('probes the health port it names and passes it to the runtime', async () => {
    const container = containerOf(await render('runtime'));
    assert.deepEqual(container.ports, [{ name: 'health', containerPort: 7090, protocol: 'TCP' }]);
    assert.equal(container.env?.find((e) => e.name === 'SWITCHYARD_HEALTH_PORT')?.value, '7090');
    assert.equal(container.livenessProbe?.httpGet.port, 'health');
    assert.equal(container.readinessProbe?.httpGet.port, 'health');
  });

  it('turns the listener and its probes off with port 0', async () => {
    const container = containerOf(await render('runtime', undefined, ['health.port=0']));
    assert.equal(container.ports, undefined);
    assert.equal(container.livenessProbe, undefined);
    assert.equal(
      container.env?.some((e) => e.name === 'SWITCHYARD_HEALTH_PORT'),
      false,
    );
  });

  // As the scheduler and gateway charts refuse metricsPort = port: the second bind fails and every pod crash-loops.
  it("refuses a health port that is the direct listener's, naming both", async () => {
    const direct = ['directListener.enabled=true', 'directListener.token.existingSecret=runtime-direct'];
    await assert.rejects(
      render('runtime', undefined, [...direct, 'health.port=7080']),
      /health\.port \(7080\) is directListener\.port too/,
    );
    await render('runtime', undefined, ['health.port=7080']);
    await render('runtime', undefined, [...direct, 'health.port=0', 'directListener.port=7080']);
  });

  it('renders a PodMonitor selecting the runtime pods on their health port, when asked', async () => {
    assert.equal((await render('runtime')).filter((m) => m.kind === 'PodMonitor').length, 0);
    const manifests = await render('runtime', undefined, ['podMonitor.enabled=true', 'podMonitor.labels.release=prom']);
    const monitor = manifests.find((m) => m.kind === 'PodMonitor') as Manifest & {
      metadata: { labels: Record<string, string> };
      spec: {
        selector: { matchLabels: Record<string, string> };
        podMetricsEndpoints: { port: string; path: string }[];
      };
    };
    assert.equal(monitor.metadata.labels.release, 'prom');
    const deployment = manifests.find((m) => m.kind === 'Deployment') as Manifest & {
      spec: { template: { metadata: { labels: Record<string, string> } } };
    };
    const podLabels = deployment.spec.template.metadata.labels;
    for (const [k, v] of Object.entries(monitor.spec.selector.matchLabels)) assert.equal(podLabels[k], v, k);
    assert.deepEqual(
      monitor.spec.podMetricsEndpoints.map((e) => [e.port, e.path]),
      [['health', '/metrics']],
    );
    await assert.rejects(render('runtime', undefined, ['podMonitor.enabled=true', 'health.port=0']), /health\.port/);
  });
});

// Its own container's PID 1 would keep the orphans of stdio servers' trees as
// zombies (test/charts/pid-one.test.ts); the pause container of a shared
// process namespace reaps them.
describe('charts/runtime: process namespace', { skip }, () => {
  const podSpecOf = async (set: string[] = []) =>
    podOf((await render('runtime', undefined, set)).find((m) => m.kind === 'Deployment')!) as unknown as {
      shareProcessNamespace?: boolean;
      containers: { name: string }[];
    };

  it("shares it by default, and the pod has no other container to see the runtime's processes", async () => {
    const pod = await podSpecOf();
    assert.equal(pod.shareProcessNamespace, true);
    assert.deepEqual(
      pod.containers.map((c) => c.name),
      ['runtime'],
    );
  });

  it('keeps it apart when asked', async () => {
    assert.equal((await podSpecOf(['shareProcessNamespace=false'])).shareProcessNamespace, false);
  });
});

describe('runtime chart contracts', { skip }, () => {
  it("sets metering.sink only when given (the runtime's own default otherwise), and refuses an unknown one", async () => {
    const sinkOf = async (set: readonly string[]): Promise<string | undefined> => {
      const deployment = (await render('runtime', undefined, set)).find((m) => m.kind === 'Deployment')!;
      const env = (podOf(deployment).containers[0]!.env ?? []) as { name: string; value?: string }[];
      return env.find((e) => e.name === 'SWITCHYARD_METERING_SINK')?.value;
    };
    assert.equal(await sinkOf([]), undefined);
    assert.equal(await sinkOf(['metering.sink=none']), 'none');
    assert.equal(await sinkOf(['metering.sink=log']), 'log');
    await assert.rejects(sinkOf(['metering.sink=off']), /metering\.sink/);
  });

  const transportOf = async (set: readonly string[] = []): Promise<string | undefined> => {
    const deployment = (await render('runtime', undefined, set)).find((m) => m.kind === 'Deployment')!;
    const env = (podOf(deployment).containers[0]!.env ?? []) as { name: string; value?: string }[];
    return env.find((e) => e.name === 'SWITCHYARD_TUNNEL_TRANSPORT')?.value;
  };

  // stdio servers inherit the runtime's HOME, where npx and uvx keep their caches (~/.npm, ~/.cache). The image's
  // user 10001 has no passwd entry, so without HOME the container runtime gives it /, which the user cannot write
  // (and the root filesystem is read-only): `npx -y <server>` fails with EACCES before the server starts.
  it('gives stdio servers a writable HOME, on a volume of the pod', async () => {
    for (const kind of ['Deployment', 'DaemonSet']) {
      const workload = (await render('runtime', undefined, [`kind=${kind}`])).find((m) => m.kind === kind)!;
      const pod = podOf(workload) as PodSpec & { volumes: { name: string; emptyDir?: unknown }[] };
      const container = pod.containers[0] as unknown as {
        env: { name: string; value?: string }[];
        volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[];
      };
      const home = container.env.find((e) => e.name === 'HOME')?.value ?? '';
      assert.ok(home.startsWith('/'), `HOME is an absolute path: ${home || 'unset'}`);
      const mount = container.volumeMounts.find((m) => home === m.mountPath || home.startsWith(`${m.mountPath}/`));
      assert.ok(mount && !mount.readOnly, `HOME ${home} is on a writable mount`);
      assert.ok(pod.volumes.find((v) => v.name === mount.name)?.emptyDir, `${mount.name} is an emptyDir`);
    }
  });

  it('sets the tunnel transport from tunnelTransport, auto by default, and refuses an unknown one', async () => {
    assert.equal(await transportOf(), 'auto');
    assert.equal(await transportOf(['tunnelTransport=websocket']), 'websocket');
    await assert.rejects(transportOf(['tunnelTransport=quic']), /tunnelTransport/);
  });
});

// The runtime reads its --config file once, at start: a change to anything
// the chart writes there must roll the pods, or it takes effect only when
// they happen to restart.
describe('charts/runtime: config file changes roll the pods', { skip }, () => {
  const annotationsOf = async (set: readonly string[]): Promise<Record<string, string>> => {
    const workload = (await render('runtime', undefined, set)).find((m) => m.kind === 'Deployment')!;
    return (workload.spec as { template: { metadata: { annotations: Record<string, string> } } }).template.metadata
      .annotations;
  };

  for (const set of [['sandboxesMax=200'], ['metadata.zone=eu-west-1a'], ['classes.other.engine=builtin']]) {
    it(`changes the pod template with ${set.join(' ')}`, async () => {
      assert.notDeepEqual(await annotationsOf(set), await annotationsOf([]));
    });
  }
});
