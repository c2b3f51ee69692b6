// A whole cluster as OS processes on loopback: schedulers electing through a
// lease file (or the fake Kubernetes Lease API), runtimes dialling them, and
// gateways in front. Used by e2e, cluster and chaos suites.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { urlHost } from '@switchyard/service';
import { spawnApp, until, type AppProcess } from './processes.ts';

export interface ClusterOptions {
  readonly schedulers?: number;
  readonly runtimes?: number;
  readonly gateways?: number;
  /** `file` (default) or the URL of a fake Kubernetes Lease API. */
  readonly lease?: 'file' | { readonly kubernetesUrl: string };
  /** Election timing; scaled down by default (3 s / 2 s / 0.5 s). */
  readonly election?: {
    leaseDurationMs: number;
    renewDeadlineMs: number;
    retryPeriodMs: number;
    jitterFactor?: number;
  };
  /**
   * Tunnel liveness interval. Default 1 s: a loaded 2-core machine can stall an
   * event loop for a few hundred ms, which would drop healthy tunnels at 300 ms.
   * Suites that time the detection of a dead runtime pass their own.
   */
  readonly tunnelPingIntervalMs?: number;
  /** Extra classes beyond `demo` (builtin): `everything` adds the reference server. */
  readonly everything?: boolean;
  /** Extra arguments of every scheduler, or of scheduler `i`. */
  readonly schedulerArgs?: readonly string[] | ((i: number) => readonly string[]);
  readonly runtimeArgs?: readonly string[];
  readonly gatewayArgs?: readonly string[];
  /**
   * For schedulers whose API wants a token (their `apiTokens`, which the
   * caller passes in `schedulerArgs`): what this support code presents, and
   * every gateway's `--scheduler-token`.
   */
  readonly apiToken?: string;
  /** How long start-up waits for every runtime to show on every scheduler; default 15 s. */
  readonly startTimeoutMs?: number;
  /** The tree every app runs from (see spawnApp's `root`), e.g. a production install; default this checkout. */
  readonly root?: string;
  /** Environment every app gets on top of this process's. */
  readonly env?: Readonly<Record<string, string>>;
  /** The loopback address schedulers and gateways listen on (and advertise); default 127.0.0.1, or ::1. */
  readonly host?: '127.0.0.1' | '::1';
}

export interface TestCluster {
  readonly dir: string;
  readonly token: string;
  readonly schedulers: AppProcess[];
  readonly runtimes: AppProcess[];
  readonly gateways: AppProcess[];
  schedulerUrls(): string[];
  /** The `/mcp` URL of gateway `i`. */
  gatewayUrl(i?: number): string;
  /**
   * Starts another runtime (e.g. a restarted one) with the cluster's settings.
   * `options.schedulerUrl` overrides the replica it dials; `options.wrapper`
   * prefixes the command (e.g. `ip netns exec <ns>`); `options.args` are its
   * own on top of `runtimeArgs`; `options.joinTokenFile` is where it reads its
   * join token instead of being given the cluster's.
   */
  startRuntime(
    id: string,
    schedulerIndex?: number,
    options?: {
      schedulerUrl?: string;
      wrapper?: readonly string[];
      args?: readonly string[];
      joinTokenFile?: string;
    },
  ): Promise<AppProcess>;
  /**
   * Starts scheduler `i` again on its previous port (so runtimes dialling it
   * and gateways listing it find it again), stopping it first if it still
   * runs. Replaces `schedulers[i]`.
   */
  restartScheduler(i: number): Promise<AppProcess>;
  /** Starts gateway `i` again on its previous port, stopping it first if it still runs. Replaces `gateways[i]`. */
  restartGateway(i: number): Promise<AppProcess>;
  /** Starts one more gateway (stopped with the cluster), listing `schedulers` (default: every replica's URL). */
  addGateway(
    schedulers?: readonly string[],
    extra?: {
      /** Arguments on top of `gatewayArgs`. */
      readonly args?: readonly string[];
      /** Its `--scheduler-token` instead of `apiToken`. */
      readonly schedulerToken?: string;
      /** Where it reads its scheduler token instead of being given one (`--scheduler-token-file`). */
      readonly schedulerTokenFile?: string;
    },
  ): Promise<AppProcess>;
  /** The scheduler that currently says it leads. */
  leader(): Promise<AppProcess>;
  /** Waits until every live scheduler's latest epoch lists exactly these available runtimes. */
  waitForRuntimes(ids: readonly string[], timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

const withToken = (token: string | undefined): Record<string, string> =>
  token === undefined ? {} : { authorization: `Bearer ${token}` };

export async function epochOf(
  url: string,
  apiToken?: string,
): Promise<{ epoch: number | null; term: number; isLeader: boolean }> {
  const res = await fetch(`${url}/api/epoch`, { headers: withToken(apiToken), signal: AbortSignal.timeout(2000) });
  return (await res.json()) as { epoch: number | null; term: number; isLeader: boolean };
}

export async function availableRuntimes(url: string, apiToken?: string): Promise<string[]> {
  const res = await fetch(`${url}/api/runtimes`, { headers: withToken(apiToken), signal: AbortSignal.timeout(2000) });
  const body = (await res.json()) as { runtimes: Array<{ id: string; available: boolean }> };
  return body.runtimes
    .filter((r) => r.available)
    .map((r) => r.id)
    .sort();
}

/** A gateway's scheduler token: from its file, else given, else none. */
function schedulerTokenArgs(file: string | undefined, token: string | undefined): string[] {
  if (file !== undefined) return ['--scheduler-token-file', file];
  return token !== undefined ? ['--scheduler-token', token] : [];
}

export async function startCluster(options: ClusterOptions = {}): Promise<TestCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-test-'));
  // Hex: a base64url token may start with `-`, which reads as an option on the apps' command lines.
  const token = randomBytes(24).toString('hex');
  const host = options.host ?? '127.0.0.1';
  const election = options.election ?? { leaseDurationMs: 3000, renewDeadlineMs: 2000, retryPeriodMs: 500 };
  const ping = String(options.tunnelPingIntervalMs ?? 1000);
  const schedulers: AppProcess[] = [];
  const runtimes: AppProcess[] = [];
  const gateways: AppProcess[] = [];
  const all = (): AppProcess[] => [...gateways, ...runtimes, ...schedulers];
  const stop = async (): Promise<void> => {
    await Promise.all(all().map((p) => p.stop(3000)));
    rmSync(dir, { recursive: true, force: true });
  };

  const leaseArgs = (): string[] => {
    if (options.lease === undefined || options.lease === 'file') {
      return ['--election.backend', 'file', '--election.lease-file', join(dir, 'lease.json')];
    }
    const kubeconfig = join(dir, 'kubeconfig.yaml');
    writeFileSync(
      kubeconfig,
      [
        'apiVersion: v1',
        'kind: Config',
        // The client refuses a plain-HTTP server unless verification is explicitly skipped; the fake has no TLS.
        `clusters: [{name: fake, cluster: {server: "${options.lease.kubernetesUrl}", insecure-skip-tls-verify: true}}]`,
        'users: [{name: fake, user: {token: fake}}]',
        'contexts: [{name: fake, context: {cluster: fake, user: fake, namespace: default}}]',
        'current-context: fake',
      ].join('\n'),
    );
    return ['--election.backend', 'kubernetes', '--election.kubeconfig', kubeconfig];
  };

  const spawnOptions = {
    ...(options.root ? { root: options.root } : {}),
    ...(options.env ? { env: { ...options.env } } : {}),
  };
  const classes: Record<string, unknown> = { demo: { engine: 'builtin' } };
  if (options.everything) {
    const entry = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/dist/index.js');
    classes.everything = { engine: 'stdio', command: process.execPath, args: [entry, 'stdio'] };
  }
  const runtimeConfig = join(dir, 'runtime.json');
  writeFileSync(runtimeConfig, JSON.stringify({ classes, sandboxesMax: 200 }));

  const spawnRuntime = (
    id: string,
    schedulerIndex: number,
    extra: Parameters<TestCluster['startRuntime']>[2] = {},
  ): Promise<AppProcess> => {
    const target = extra.schedulerUrl ?? schedulers[schedulerIndex % schedulers.length]!.url!;
    const args = [
      ...['--config', runtimeConfig, '--runtime-id', id, '--scheduler-url', target],
      ...(extra.joinTokenFile ? ['--join-token-file', extra.joinTokenFile] : ['--join-token', token]),
      ...['--tunnel.ping-interval-ms', ping, '--drain-delay-ms', '0'],
      ...(options.runtimeArgs ?? []),
      ...(extra.args ?? []),
    ];
    return spawnApp('runtime', id, args, { ...spawnOptions, ...(extra.wrapper ? { wrapper: extra.wrapper } : {}) });
  };
  const startRuntime: TestCluster['startRuntime'] = async (id, schedulerIndex = runtimes.length, extra = {}) => {
    const runtime = await spawnRuntime(id, schedulerIndex, extra);
    runtimes.push(runtime);
    return runtime;
  };
  const startScheduler = (i: number, port: number): Promise<AppProcess> =>
    spawnApp(
      'scheduler',
      `s${i}`,
      [
        ...['--host', host, '--port', String(port), '--replica-id', `s${i}`, ...leaseArgs()],
        ...['--election.lease-duration-ms', String(election.leaseDurationMs)],
        ...['--election.renew-deadline-ms', String(election.renewDeadlineMs)],
        ...['--election.retry-period-ms', String(election.retryPeriodMs)],
        ...(election.jitterFactor === undefined ? [] : ['--election.jitter-factor', String(election.jitterFactor)]),
        ...['--join-tokens', token, '--tunnel.ping-interval-ms', ping, '--drain-delay-ms', '0'],
        ...(typeof options.schedulerArgs === 'function' ? options.schedulerArgs(i) : (options.schedulerArgs ?? [])),
      ],
      spawnOptions,
    );
  const startGateway = (
    i: number,
    port: number,
    to: readonly string[] = schedulers.map((s) => s.url!),
    extra: {
      readonly args?: readonly string[];
      readonly schedulerToken?: string;
      readonly schedulerTokenFile?: string;
    } = {},
  ): Promise<AppProcess> =>
    spawnApp(
      'gateway',
      `g${i}`,
      [
        ...['--host', host, '--port', String(port), '--default-class', 'demo', '--drain-delay-ms', '0'],
        ...['--schedulers', to.join(',')],
        ...schedulerTokenArgs(extra.schedulerTokenFile, extra.schedulerToken ?? options.apiToken),
        ...(options.gatewayArgs ?? []),
        ...(extra.args ?? []),
      ],
      spawnOptions,
    );

  try {
    for (let i = 0; i < (options.schedulers ?? 3); i++) schedulers.push(await startScheduler(i, 0));
    // Runtimes and gateways start side by side: each needs only the replicas, and
    // one at a time, their start-ups were most of a cluster's. The arrays keep
    // their order (`runtimes[i]` is `r${i}`), and every one started is stopped
    // if another fails.
    const runtimesStarted = Promise.allSettled(
      Array.from({ length: options.runtimes ?? 2 }, (_, i) => spawnRuntime(`r${i}`, i)),
    );
    const gatewaysStarted = Promise.allSettled(
      Array.from({ length: options.gateways ?? 1 }, (_, i) => startGateway(i, 0)),
    );
    const [runtimesSettled, gatewaysSettled] = [await runtimesStarted, await gatewaysStarted];
    for (const r of runtimesSettled) if (r.status === 'fulfilled') runtimes.push(r.value);
    for (const g of gatewaysSettled) if (g.status === 'fulfilled') gateways.push(g.value);
    const failed = [...runtimesSettled, ...gatewaysSettled].find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
  } catch (error) {
    await stop();
    throw error;
  }

  const alive = (): AppProcess[] => schedulers.filter((s) => s.child.exitCode === null && s.child.signalCode === null);
  const cluster: TestCluster = {
    dir,
    token,
    schedulers,
    runtimes,
    gateways,
    schedulerUrls: () => schedulers.map((s) => s.url!),
    gatewayUrl: (i = 0) => `http://${urlHost(host)}:${gateways[i]!.port}/mcp`,
    startRuntime,
    async restartScheduler(i) {
      const old = schedulers[i]!;
      await old.stop(1000);
      schedulers[i] = await startScheduler(i, old.port!);
      return schedulers[i];
    },
    async addGateway(to, extra) {
      const gateway = await startGateway(gateways.length, 0, to, extra);
      gateways.push(gateway);
      return gateway;
    },
    async restartGateway(i) {
      const old = gateways[i]!;
      await old.stop(1000);
      gateways[i] = await startGateway(i, old.port!);
      return gateways[i];
    },
    leader: () =>
      until('a leader', async () => {
        for (const s of alive()) {
          const info = await epochOf(s.url!, options.apiToken).catch(() => undefined);
          if (info?.isLeader) return s;
        }
        return undefined;
      }),
    waitForRuntimes: (ids, timeoutMs = 10_000) =>
      until(
        `runtimes ${ids.join(',')} on every scheduler`,
        async () => {
          const want = [...ids].sort().join(',');
          const seen = await Promise.all(alive().map((s) => availableRuntimes(s.url!, options.apiToken)));
          return seen.every((list) => list.join(',') === want) || undefined;
        },
        timeoutMs,
      ).then(() => undefined),
    stop,
  };
  try {
    await cluster.waitForRuntimes(
      runtimes.map((r) => r.name),
      options.startTimeoutMs ?? 15_000,
    );
  } catch (error) {
    // The caller never gets the cluster to stop: without this, the spawned processes keep the test alive.
    await stop();
    throw error;
  }
  return cluster;
}
