import { WebSocket } from 'ws';
import { MemoryLeaseStore, createMemoryLock } from '@switchyard/election';
import { startRuntimeNode, type RuntimeNode } from '@switchyard/runtime';
import { createMetrics } from '@switchyard/service';
import {
  startSchedulerReplica,
  type ReplicaLogger,
  type SchedulerReplica,
  type SchedulerReplicaOptions,
} from '@switchyard/scheduler';

export const TOKEN = 'test-join-token-0123456789';

/** A peer on `replica`'s epoch sync (as `intruder`, admitted with TOKEN), open; `closed` says how it closed, once it has. */
export interface SyncPeer {
  readonly ws: WebSocket;
  closed?: { code: number; reason: string };
}

export async function syncPeer(replica: SchedulerReplica): Promise<SyncPeer> {
  const ws = new WebSocket(`ws://127.0.0.1:${replica.port}/api/sync/intruder`, {
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  const peer: SyncPeer = { ws };
  ws.on('close', (code, reason) => (peer.closed = { code, reason: reason.toString() }));
  ws.on('error', () => {});
  await new Promise((resolve) => ws.once('open', resolve));
  return peer;
}

export const quietLogger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
};

/** A line a replica logged through `recordingLogger`. */
export interface LoggedLine {
  readonly replica: string;
  readonly level: string;
  readonly fields: Record<string, unknown>;
  readonly msg: string;
}

/** A logger for replica `replica` that appends each line to `lines`. */
export function recordingLogger(replica: string, lines: LoggedLine[]): ReplicaLogger {
  const at =
    (level: string) =>
    (fields: object, msg = ''): void =>
      void lines.push({ replica, level, fields: fields as Record<string, unknown>, msg });
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

/** Tuned-down timings so elections and epochs settle in well under a second. */
export const FAST_ELECTION = { leaseDurationMs: 1500, renewDeadlineMs: 1000, retryPeriodMs: 200 };

export async function startReplicas(
  count: number,
  store = new MemoryLeaseStore(),
  logger: ReplicaLogger = quietLogger,
  extra: Partial<SchedulerReplicaOptions> = {},
): Promise<SchedulerReplica[]> {
  const replicas: SchedulerReplica[] = [];
  for (let i = 0; i < count; i++) {
    replicas.push(
      await startSchedulerReplica({
        replicaId: `s${i}`,
        advertiseUrl: 'http://127.0.0.1:{port}',
        host: '127.0.0.1',
        port: 0,
        lock: createMemoryLock(store),
        election: FAST_ELECTION,
        epoch: { cycleIntervalMs: 200 },
        joinTokens: () => [TOKEN],
        tunnelPingIntervalMs: 300,
        logger,
        metrics: createMetrics('scheduler'),
        ...extra,
      }),
    );
  }
  return replicas;
}

export async function startRuntime(
  id: string,
  schedulerUrl: string,
  classes = ['demo'],
  tunnelPingIntervalMs = 300,
  joinToken = TOKEN,
): Promise<RuntimeNode> {
  return startRuntimeNode({
    runtimeId: id,
    schedulerUrl,
    joinToken,
    classes: Object.fromEntries(classes.map((c) => [c, { engine: 'builtin' as const }])),
    sandboxesMax: 10,
    sessionIdleMs: 60_000,
    tunnelPingIntervalMs,
    logger: quietLogger,
    metrics: createMetrics('runtime'),
  });
}

/** A runtime whose idle weight a test sets through its sidecar API (`weigh`): each change makes one epoch. */
export async function startWeightedRuntime(
  id: string,
  schedulerUrl: string,
): Promise<{ node: RuntimeNode; weigh: (sandboxes: number) => Promise<void> }> {
  const node = await startRuntimeNode({
    runtimeId: id,
    schedulerUrl,
    joinToken: TOKEN,
    classes: { demo: { engine: 'builtin' } },
    sandboxesMax: 10,
    sessionIdleMs: 60_000,
    tunnelPingIntervalMs: 300,
    sidecarPort: 0,
    logger: quietLogger,
    metrics: createMetrics('runtime'),
  });
  const weigh = async (sandboxes: number): Promise<void> => {
    const res = await fetch(`${node.sidecarUrl}/weight`, { method: 'PUT', body: JSON.stringify({ sandboxes }) });
    if (res.status !== 204) throw new Error(`PUT /weight answered ${res.status}`);
  };
  return { node, weigh };
}

export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 5000,
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export async function getJson(url: string): Promise<{ status: number; body: any }> {
  const res = await fetch(url);
  return { status: res.status, body: await res.json() };
}

export async function postJson(url: string, body: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}
