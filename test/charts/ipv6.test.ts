// The charts on an IPv6 cluster (ipFamily), rendered with the real helm
// binary: each app, started with --print-config on its pod's environment,
// listens on :: and writes the pod IP in brackets.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import { compileCacheEnv } from '../support/processes.ts';
import { chartRenderer } from './helm.ts';
import { podOf } from './manifests.ts';

const root = join(import.meta.dirname, '../..');
// The apps these tests start take this process's environment: through Node's
// compile cache, all but the first load without the type stripper.
for (const [name, value] of Object.entries(compileCacheEnv())) process.env[name] ??= value;
const run = promisify(execFile);
const { skip, render } = chartRenderer('chart IPv6 tests');

// On an IPv6-only cluster, or a dual-stack one whose pods' first address is
// IPv6, status.podIP is an IPv6 address: the listeners must take IPv6
// connections (kubelet probes and peers dial the pod IP), and a URL naming
// the pod IP must write it in brackets, or the app refuses it and exits.
describe('charts: ipFamily IPv6', { skip }, () => {
  const POD_IP = 'fd00:10:244::5';
  const ARGS: Record<string, string[]> = {
    scheduler: [],
    gateway: [],
    runtime: ['--scheduler-url', 'http://[fd00:10:96::10]:7070'],
  };
  /** The config `chart`'s app starts with in a pod rendered with `set`, $(POD_IP) expanded as kubelet does. */
  async function podConfig(chart: string, set: readonly string[], valuesFile?: string) {
    const workload = (await render(chart, valuesFile, set)).find((m) =>
      ['Deployment', 'StatefulSet', 'DaemonSet'].includes(m.kind),
    )!;
    const inherited = Object.entries(process.env).filter(([n]) => !n.startsWith('SWITCHYARD_'));
    // What kubelet gives every pod on an IPv6 cluster (the scheduler's kubernetes backend reads it).
    const env: Record<string, string | undefined> = {
      ...Object.fromEntries(inherited),
      KUBERNETES_SERVICE_HOST: 'fd00:10:96::1',
      KUBERNETES_SERVICE_PORT: '443',
    };
    for (const e of podOf(workload).containers[0]!.env as { name: string; value?: string }[]) {
      if (e.name === 'POD_IP') env.POD_IP = POD_IP;
      else if (e.value !== undefined) env[e.name] = e.value.replaceAll('$(POD_IP)', POD_IP);
    }
    const result = await run(
      process.execPath,
      [join(root, `apps/${chart}/src/main.ts`), ...ARGS[chart]!, '--print-config'],
      { env },
    ).catch((error: { stderr: string }) => assert.fail(`${chart} refused its pod's environment: ${error.stderr}`));
    return parse(result.stdout) as Record<string, unknown> & {
      host?: string;
      advertiseUrl?: string;
      directListen?: { host: string; advertiseUrl?: string };
      health?: { host: string };
    };
  }

  it('scheduler: listens on :: and advertises http://[<pod IP>]:<port>', async () => {
    const config = await podConfig('scheduler', ['ipFamily=IPv6']);
    assert.equal(config.host, '::');
    assert.equal(config.advertiseUrl, `http://[${POD_IP}]:7070`);
  });

  it('gateway: listens on ::', async () => {
    assert.equal((await podConfig('gateway', ['ipFamily=IPv6'])).host, '::');
    assert.equal((await podConfig('gateway', [])).host, '0.0.0.0', 'IPv4 by default');
  });

  it('runtime: serves its direct and health listeners on :: and advertises http://[<pod IP>]:<port>', async () => {
    const config = await podConfig('runtime', ['ipFamily=IPv6'], 'test/charts/values-production-runtime.yaml');
    assert.equal(config.directListen?.host, '::');
    assert.equal(config.directListen?.advertiseUrl, `http://[${POD_IP}]:7080`);
    assert.equal(config.health?.host, '::');
  });

  it('refuses an ipFamily other than IPv4 or IPv6', async () => {
    for (const chart of ['scheduler', 'gateway', 'runtime']) {
      await assert.rejects(render(chart, undefined, ['ipFamily=ipv6']), /ipFamily/, chart);
    }
  });
});
