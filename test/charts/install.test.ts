// The three charts installed together as docs/operations.md says, rendered
// with the real helm binary: the install commands point runtimes and
// gateways at the scheduler's Service, the default class is one the runtimes
// serve, and each app starts beside the Services of the three releases.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse, parseAllDocuments } from 'yaml';
import { compileCacheEnv } from '../support/processes.ts';
import { chartRenderer, type Manifest } from './helm.ts';
import { podOf, type PodSpec } from './manifests.ts';

const root = join(import.meta.dirname, '../..');
// The apps these tests start take this process's environment: through Node's
// compile cache, all but the first load without the type stripper.
for (const [name, value] of Object.entries(compileCacheEnv())) process.env[name] ??= value;
const run = promisify(execFile);
const { skip, render, helmRun } = chartRenderer('chart install tests');

describe('the install commands of docs/operations.md', () => {
  it('point runtimes and gateways at the Service their scheduler release creates', { skip }, async () => {
    const doc = readFileSync(join(root, 'docs/operations.md'), 'utf8');
    const releases = new Set([...doc.matchAll(/helm install (\S+) charts\/scheduler\b/g)].map((m) => m[1]!));
    // In-cluster URLs name a Service of the namespace (no dot); the others go through an Ingress host.
    const urls = [...doc.matchAll(/(?:schedulerUrl=|schedulers='\{)(https?:\/\/[^}'\s]+)/g)]
      .map((m) => m[1]!)
      .filter((url) => !new URL(url).hostname.includes('.'));
    const valuesOf = (chart: string) => parse(readFileSync(join(root, `charts/${chart}/values.yaml`), 'utf8'));
    const defaults = [...(valuesOf('gateway') as { schedulers: string[] }).schedulers];
    defaults.push((valuesOf('runtime') as { schedulerUrl: string }).schedulerUrl);
    assert.ok(releases.size > 0 && urls.length > 0, 'the page installs a scheduler and points others at it');
    // The chart's own name as the release, or a prefix of it: both give the Service the defaults name.
    for (const release of [...releases, 'switchyard']) {
      const manifests = parseAllDocuments(await helmRun(['template', release, 'charts/scheduler']))
        .map((d) => d.toJSON() as Manifest | null)
        .filter((m): m is Manifest => m?.kind === 'Service');
      const services = manifests.map((m) => m.metadata.name);
      for (const url of [...urls, ...defaults]) {
        assert.ok(
          services.includes(new URL(url).hostname),
          `${url} names a Service of release ${release}: ${services}`,
        );
      }
    }
  });
});

// An MCP client that sets no header (most do not) gets the gateway's default
// class: with every chart at its defaults, as the install commands of
// operations.md leave them, the runtimes must serve it, or every such client
// gets 503 "no runtime serves class …".
describe('the default values of the gateway and runtime charts', { skip }, () => {
  it('send a request that names no class to a class the runtimes serve; defaultClass moves it', async () => {
    const gatewayEnv = async (set: readonly string[] = []): Promise<string | undefined> => {
      const deployment = (await render('gateway', undefined, set)).find((m) => m.kind === 'Deployment')!;
      const env = (podOf(deployment).containers[0]!.env ?? []) as { name: string; value?: string }[];
      return env.find((e) => e.name === 'SWITCHYARD_DEFAULT_CLASS')?.value;
    };
    // The gateway's own default when the chart sets nothing.
    const { stdout } = await run(process.execPath, [
      join(root, 'apps/gateway/src/main.ts'),
      ...['--schedulers', 'http://127.0.0.1:1', '--print-config'],
    ]);
    const appDefault = /^defaultClass: (\S+)$/m.exec(stdout)![1]!;
    const defaultClass = (await gatewayEnv()) ?? appDefault;
    const configMap = (await render('runtime')).find((m) => m.kind === 'ConfigMap')!;
    const runtimeConfig = parse(Object.values(configMap.data as Record<string, string>)[0]!) as {
      classes: Record<string, unknown>;
    };
    assert.ok(
      Object.hasOwn(runtimeConfig.classes, defaultClass),
      `gateway default class ${defaultClass}, runtime classes ${Object.keys(runtimeConfig.classes)}`,
    );
    assert.equal(await gatewayEnv(['defaultClass=gpu']), 'gpu');
    await assert.rejects(gatewayEnv(['defaultClass=two words']), /defaultClass/);
  });
});

/**
 * The variables kubelet puts in every pod of a namespace for each of its
 * Services with a cluster IP (Docker-link style, pkg/kubelet/envvars), unless
 * the pod sets `enableServiceLinks: false`: `<NAME>_SERVICE_HOST`,
 * `<NAME>_PORT_<port>_TCP_ADDR` and the like, `<NAME>` the Service's name in
 * upper snake case.
 */
function serviceLinkEnv(service: Manifest): Record<string, string> {
  const spec = service.spec as { clusterIP?: string; ports: { name?: string; port: number; protocol?: string }[] };
  if (spec.clusterIP === 'None') return {};
  const name = service.metadata.name.toUpperCase().replaceAll('-', '_');
  const ip = '10.96.0.10';
  const env: Record<string, string> = {
    [`${name}_SERVICE_HOST`]: ip,
    [`${name}_SERVICE_PORT`]: String(spec.ports[0]!.port),
  };
  spec.ports.forEach((p, i) => {
    const proto = (p.protocol ?? 'TCP').toLowerCase();
    const prefix = `${name}_PORT_${p.port}_${proto.toUpperCase()}`;
    if (p.name) env[`${name}_SERVICE_PORT_${p.name.toUpperCase().replaceAll('-', '_')}`] = String(p.port);
    if (i === 0) env[`${name}_PORT`] = `${proto}://${ip}:${p.port}`;
    Object.assign(env, {
      [prefix]: `${proto}://${ip}:${p.port}`,
      [`${prefix}_PROTO`]: proto,
      [`${prefix}_PORT`]: String(p.port),
      [`${prefix}_ADDR`]: ip,
    });
  });
  return env;
}

// Installed as docs/operations.md says, the Services are named
// switchyard-scheduler and switchyard-gateway, so kubelet hands every pod of
// the namespace SWITCHYARD_SCHEDULER_SERVICE_HOST and friends; the apps take
// an unknown SWITCHYARD_* name for a typo and refuse to start.
describe('charts: pods start beside the Services of the three releases', { skip }, () => {
  const releases = { scheduler: 'switchyard-scheduler', gateway: 'switchyard-gateway', runtime: 'switchyard-runtime' };
  const ARGS: Record<string, string[]> = {
    scheduler: [],
    gateway: ['--schedulers', 'http://127.0.0.1:1'],
    runtime: ['--scheduler-url', 'http://127.0.0.1:1'],
  };
  for (const [chart, release] of Object.entries(releases)) {
    it(`${chart}: its app reads the environment kubelet gives its pods`, async () => {
      const rendered = await Promise.all(
        Object.entries(releases).map(async ([c, r]) =>
          parseAllDocuments(await helmRun(['template', r, `charts/${c}`, '--namespace', 'switchyard']))
            .map((d) => d.toJSON() as Manifest | null)
            .filter((m): m is Manifest => m !== null),
        ),
      );
      const links = Object.assign(
        {},
        ...rendered
          .flat()
          .filter((m) => m.kind === 'Service')
          .map(serviceLinkEnv),
      ) as Record<string, string>;
      assert.ok(
        Object.keys(links).some((n) => n.startsWith('SWITCHYARD_')),
        Object.keys(links).join(','),
      );
      const own = rendered[Object.keys(releases).indexOf(chart)]!;
      const workload = own.find((m) => ['Deployment', 'StatefulSet', 'DaemonSet'].includes(m.kind))!;
      assert.ok(workload, `${release} has a workload`);
      const pod = podOf(workload) as PodSpec & { enableServiceLinks?: boolean };
      const injected = pod.enableServiceLinks === false ? {} : links;
      const env = Object.fromEntries(Object.entries(process.env).filter(([n]) => !n.startsWith('SWITCHYARD_')));
      const result = await run(
        process.execPath,
        [join(root, `apps/${chart}/src/main.ts`), ...ARGS[chart]!, '--print-config'],
        { env: { ...env, ...injected } },
      ).catch((error: { code: number; stderr: string }) => error);
      assert.ok(
        !('code' in result) || result.code === 0,
        `${chart} refused its pod's environment: ${'stderr' in result ? result.stderr : ''}`,
      );
    });
  }
});
