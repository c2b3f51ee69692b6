// The app options a chart exposes as values of the same name reach the app as
// that option: each chart is rendered with the real helm binary, once with its
// defaults and once with every such value set, and the app itself, started
// with `--print-config` on the environment the values changed, says what it
// read. The defaults the charts write must be the apps' own, so a chart that
// leaves a value alone runs the app as it would run without the chart.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { compileCacheEnv } from '../support/processes.ts';
import { locateHelm, root, run } from './helm.ts';

const { helm, skip } = locateHelm('chart app-option tests');

type Chart = 'scheduler' | 'gateway' | 'runtime';
/** Chart value → [a value to set, the app option it is]. */
type Exposed = Record<string, [unknown, string]>;

const EXPOSED: Record<Chart, Exposed> = {
  scheduler: {
    'tunnel.pingIntervalMs': [2500, 'tunnel.pingIntervalMs'],
    gatewayPingIntervalMs: [4000, 'gatewayPingIntervalMs'],
    writeStallTimeoutMs: [30_000, 'writeStallTimeoutMs'],
    'epoch.frameBytesMax': [134217728, 'epoch.frameBytesMax'],
    'epoch.runBytesMax': [1073741824, 'epoch.runBytesMax'],
    'runtimeState.processesMax': [20_000, 'runtimeState.processesMax'],
    'runtimeState.threadsMax': [250_000, 'runtimeState.threadsMax'],
  },
  gateway: {
    keepAliveTimeoutMs: [3_700_000, 'keepAliveTimeoutMs'],
    upstreamCheckIntervalMs: [0, 'upstreamCheckIntervalMs'],
    eventStreamPingIntervalMs: [20_000, 'eventStreamPingIntervalMs'],
    writeStallTimeoutMs: [120_000, 'writeStallTimeoutMs'],
    'identity.class': ['header:X-Tenant-Class', 'identity.class'],
    'identity.process': ['principal', 'identity.process'],
    'identity.thread': ['mcp-session,random', 'identity.thread'],
    headerBytesMax: [65536, 'headerBytesMax'],
    headersTimeoutMs: [10_000, 'headersTimeoutMs'],
    bodyTimeoutMs: [20_000, 'bodyTimeoutMs'],
    principalConcurrencyMax: [32, 'principalConcurrencyMax'],
    clientIpv6PrefixLength: [128, 'clientIpv6PrefixLength'],
    'auth.mode': ['jwt', 'auth.mode'],
    'auth.jwksUrl': ['https://login.example.com/jwks', 'auth.jwksUrl'],
    'auth.classScopes': [{ 'prod-db': ['db:read', 'db:write'], 'billing.v2': ['billing'] }, 'auth.classScopes'],
    'auth.toolScopes': [{ delete_repo: ['repo:admin'], 'admin.rotate-keys': ['keys:admin'] }, 'auth.toolScopes'],
  },
  runtime: {
    tunnelPingIntervalMs: [15_000, 'tunnel.pingIntervalMs'],
    sessionIdleMs: [600_000, 'sessionIdleMs'],
    version: ['2.1.0-rc.1', 'version'],
  },
};

/** Values each app would refuse at start, so that its pods crash-loop: the chart refuses them at install, by name. */
const REFUSED: Record<Chart, [Record<string, unknown>, RegExp][]> = {
  scheduler: [
    [{ 'tunnel.pingIntervalMs': 0 }, /tunnel\.pingIntervalMs: Must be greater than or equal to 1/],
    [{ gatewayPingIntervalMs: 50 }, /gatewayPingIntervalMs: Must be greater than or equal to 100/],
    [{ writeStallTimeoutMs: 500 }, /writeStallTimeoutMs: Must be greater than or equal to 1000/],
    [{ 'epoch.frameBytesMax': 1024 }, /epoch\.frameBytesMax: Must be greater than or equal to 65536/],
    [{ 'epoch.runBytesMax': 1024 }, /epoch\.runBytesMax: Must be greater than or equal to 65536/],
    [{ 'runtimeState.processesMax': 0 }, /runtimeState\.processesMax: Must be greater than or equal to 1/],
    [{ 'runtimeState.processesMax': 1_000_001 }, /runtimeState\.processesMax: Must be less than or equal to 1e\+06/],
    [{ 'runtimeState.threadsMax': 10_000_001 }, /runtimeState\.threadsMax: Must be less than or equal to 1e\+07/],
  ],
  gateway: [
    [{ 'identity.process': 'princpal' }, /identity\.process: Does not match pattern/],
    [{ upstreamCheckIntervalMs: 50 }, /upstreamCheckIntervalMs \(50\) must be 0 \(no checks\) or at least 100/],
    [{ headerBytesMax: 512 }, /headerBytesMax: Must be greater than or equal to 1024/],
    [{ clientIpv6PrefixLength: 129 }, /clientIpv6PrefixLength: Must be less than or equal to 128/],
    [{ keepAliveTimeoutMs: 3_000_000_000 }, /keepAliveTimeoutMs: Must be less than or equal to 2.147483647e\+09/],
    [{ 'auth.classScopes': { 'prod-db': [] } }, /auth\.classScopes\.prod-db: Array must have at least 1 items/],
    [{ 'auth.classScopes': { 'prod db': ['db:read'] } }, /auth\.classScopes/],
    [{ 'auth.classScopes': { 'prod-db': ['a"b'] } }, /auth\.classScopes\.prod-db\.0: Does not match pattern/],
    [{ 'auth.toolScopes': { delete_repo: [] } }, /auth\.toolScopes\.delete_repo: Array must have at least 1 items/],
    [{ 'auth.toolScopes': { '': ['repo:admin'] } }, /auth\.toolScopes/],
    [{ 'auth.toolScopes': { delete_repo: ['a"b'] } }, /auth\.toolScopes\.delete_repo\.0: Does not match pattern/],
  ],
  runtime: [
    [{ version: 'latest' }, /version: Does not match pattern/],
    [{ sessionIdleMs: 0 }, /sessionIdleMs: Must be greater than or equal to 1/],
  ],
};

/** What each app needs on its command line to print its config at all. */
const ARGS: Record<Chart, string[]> = {
  scheduler: [],
  gateway: ['--schedulers', 'http://127.0.0.1:1'],
  runtime: ['--scheduler-url', 'http://127.0.0.1:1'],
};

type Env = Map<string, string>;

/** The literal environment of the chart's one container, rendered with `values` set (helm --set-json). */
async function containerEnv(chart: Chart, values: Record<string, unknown> = {}): Promise<Env> {
  const args = ['template', 'sy', `charts/${chart}`, '--namespace', 'switchyard'];
  for (const [key, value] of Object.entries(values)) args.push('--set-json', `${key}=${JSON.stringify(value)}`);
  const { stdout } = await run(helm, args, { cwd: root, maxBuffer: 16 << 20 });
  const workload = parseAllDocuments(stdout)
    .map((d) => d.toJSON() as { kind?: string; spec?: unknown } | null)
    .find((m) => ['Deployment', 'StatefulSet', 'DaemonSet'].includes(m?.kind ?? ''))!;
  const pod = (workload.spec as { template: { spec: { containers: { env?: { name: string; value?: string }[] }[] } } })
    .template.spec;
  const env = pod.containers[0]!.env ?? [];
  return new Map(env.filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]));
}

/** The config `chart`'s app prints with `env` (and no other SWITCHYARD_* name). */
async function printedConfig(chart: Chart, env: Env): Promise<Record<string, unknown>> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('SWITCHYARD_')));
  const { stdout } = await run(
    process.execPath,
    [join(root, `apps/${chart}/src/main.ts`), ...ARGS[chart], '--print-config'],
    { env: { ...base, ...compileCacheEnv(), ...Object.fromEntries(env) } },
  );
  return parse(stdout) as Record<string, unknown>;
}

const at = (config: Record<string, unknown>, path: string): unknown =>
  path.split('.').reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], config);

for (const chart of ['scheduler', 'gateway', 'runtime'] as const) {
  describe(`charts/${chart}: app options exposed as values`, { skip }, () => {
    const exposed = EXPOSED[chart];
    const setValues = Object.fromEntries(Object.entries(exposed).map(([key, [value]]) => [key, value]));

    it('hands each value to the app as its option', async () => {
      const [defaults, set] = await Promise.all([containerEnv(chart), containerEnv(chart, setValues)]);
      const changed: Env = new Map([...set].filter(([name, value]) => defaults.get(name) !== value));
      // helm holds numbers as floats, which a plain `quote` writes as 6.7108864e+07.
      for (const [name, value] of changed) assert.doesNotMatch(value, /e[+-]\d+$/, `${name}: ${value}`);
      const config = await printedConfig(chart, changed);
      for (const [key, [value, option]] of Object.entries(exposed)) {
        assert.deepEqual(at(config, option), value, `${key} → ${option}`);
      }
    });

    it('refuses at install what the app would refuse at start, naming the value', async () => {
      for (const [values, message] of REFUSED[chart]) await assert.rejects(containerEnv(chart, values), message);
    });

    it("writes the app's own defaults when the values are left alone", async () => {
      const [defaults, set] = await Promise.all([containerEnv(chart), containerEnv(chart, setValues)]);
      // The names the values control, as the default render writes them (a name it leaves out is the app's default).
      const controlled: Env = new Map(
        [...set.keys()]
          .filter((n) => defaults.get(n) !== set.get(n) && defaults.has(n))
          .map((n) => [n, defaults.get(n)!]),
      );
      const [fromChart, own] = await Promise.all([printedConfig(chart, controlled), printedConfig(chart, new Map())]);
      for (const [key, [, option]] of Object.entries(exposed)) {
        assert.deepEqual(at(fromChart, option), at(own, option), `${key} → ${option}`);
      }
    });
  });
}
