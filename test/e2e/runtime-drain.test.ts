// Acceptance at the process level: a runtime stopped with SIGTERM (a rolling
// restart, a node drained) takes no new sandbox for its drain delay, while the
// sessions it holds go on; then it stops and they get 404, as for any runtime
// gone. A tool call in flight when it stops is answered first; one that
// holds no sandbox stops at once. Schedulers, gateway and runtimes are
// separate processes on loopback.
import { execFile } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import type { AppProcess } from '../support/processes.ts';
import { until } from '../support/processes.ts';
import {
  LEGACY,
  callWith,
  connect,
  counter,
  metric,
  post,
  sessionOf,
  textOf,
  toolCallBody,
  whoami,
  type AnyClient,
} from './support.ts';

const execFileAsync = promisify(execFile);

/** The draining runtime's drain delay: long enough for every check below to run inside it. */
const DRAIN_MS = 8000;
const NEW_SESSIONS = 12;
/** A tool call still running when its runtime is told to stop (and after it left the schedulers' views). */
const SLEEP_MS = 3000;

/** The `switchyard` command, run as operators do. */
const CLI = fileURLToPath(new URL('../../apps/cli/src/main.ts', import.meta.url));

interface Listed {
  id: string;
  idleWeight: Record<string, number>;
  metadata: Record<string, string>;
}

/** `runtimeId` as scheduler `url` lists it. */
async function listedOn(url: string, runtimeId: string): Promise<Listed | undefined> {
  const res = await fetch(`${url}/api/runtimes`, { signal: AbortSignal.timeout(2000) });
  const body = (await res.json()) as { runtimes: Listed[] };
  return body.runtimes.find((r) => r.id === runtimeId);
}

/**
 * Opens sessions of new named processes (`<prefix>-<n>`) through the gateway
 * at `url` until one lands on `runtime`; every client opened goes onto
 * `clients`, for the caller to close.
 */
async function sessionOn(
  url: string,
  runtime: string,
  prefix: string,
  clients: AnyClient[],
): Promise<{ client: AnyClient; process: string }> {
  for (let i = 0; i < 40; i++) {
    const process = `${prefix}-${i}`;
    const client = await connect('v2', url, { 'x-switchyard-process': process });
    clients.push(client);
    if ((await whoami(client)).runtime === runtime) return { client, process };
  }
  throw new Error(`none of 40 sessions landed on ${runtime}`);
}

describe('a runtime draining on SIGTERM', () => {
  let cluster: TestCluster;
  let draining: AppProcess;
  const clients: AnyClient[] = [];
  before(async () => {
    cluster = await startCluster({ runtimes: 1 });
    draining = await cluster.startRuntime('r1', 0, { args: ['--drain-delay-ms', String(DRAIN_MS)] });
    await cluster.waitForRuntimes(['r0', 'r1'], 15_000);
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => {})));
    await cluster?.stop();
  });

  it('places new sessions elsewhere while its own go on, then stops and its sessions get 404', async () => {
    const held = await sessionOn(cluster.gatewayUrl(), 'r1', 'held', clients);
    assert.equal(await counter(held.client), 1);

    const termAt = performance.now();
    draining.signal('SIGTERM');
    await until('every scheduler to see r1 draining, offering no idle weight', async () => {
      const listed = await Promise.all(cluster.schedulerUrls().map((url) => listedOn(url, 'r1')));
      return listed.every((r) => r?.idleWeight.sandboxes === 0 && r.metadata['switchyard/draining'] === 'true');
    });
    console.log(`# every scheduler saw r1 draining ${performance.now() - termAt} ms after SIGTERM`);
    // An operator tells it from a full runtime, which offers no idle weight either.
    const status = await execFileAsync(process.execPath, [CLI, 'status', '--scheduler', cluster.schedulerUrls()[0]!], {
      timeout: 15_000,
    });
    assert.match(status.stdout, /^r1 +draining /m, status.stdout);
    assert.match(status.stdout, /^r0 +available /m, status.stdout);
    assert.equal(await metric(cluster.schedulerUrls()[0]!, 'switchyard_scheduler_runtimes', { state: 'draining' }), 1);

    // New processes, of sessions and of stateless requests, go to the other runtime.
    for (let i = 0; i < NEW_SESSIONS; i++) {
      const client = await connect('v2', cluster.gatewayUrl());
      clients.push(client);
      assert.equal((await whoami(client)).runtime, 'r0', `new session ${i}`);
    }
    const modern = await connect('v2-modern', cluster.gatewayUrl());
    clients.push(modern);
    for (let i = 0; i < NEW_SESSIONS; i++) assert.equal((await whoami(modern)).runtime, 'r0', `stateless call ${i}`);

    // The held session goes on, and a new session of its process joins its sandbox there.
    assert.equal(await counter(held.client), 2);
    const joining = await connect('v2', cluster.gatewayUrl(), { 'x-switchyard-process': held.process });
    clients.push(joining);
    assert.equal((await whoami(joining)).runtime, 'r1');
    assert.equal(await counter(joining), 3);
    assert.equal(draining.child.exitCode, null, 'r1 still runs: all of the above happened within its drain');
    assert.ok(
      draining.logs.some((l) => String(l.msg).startsWith('draining: no new sandbox')),
      'r1 logged its drain',
    );

    const { code } = await draining.exited;
    const stoppedMs = performance.now() - termAt;
    assert.equal(code, 0);
    assert.ok(stoppedMs >= DRAIN_MS, `r1 stopped ${stoppedMs} ms after SIGTERM, not before its drain delay`);
    const session = sessionOf(held.client);
    await until('the held session to be answered 404', async () => {
      const reply = await post(cluster.gatewayUrl(), toolCallBody(7, 'counter'), {
        'mcp-session-id': session,
        'mcp-protocol-version': LEGACY,
      });
      return reply.status === 404 || undefined;
    });
  });

  it('answers a tool call in flight when it stops, then closes its sessions', async () => {
    const stopping = await cluster.startRuntime('r3', 0, { args: ['--drain-delay-ms', '0'] });
    await cluster.waitForRuntimes(['r0', 'r3'], 15_000);
    const { client } = await sessionOn(cluster.gatewayUrl(), 'r3', 'in-flight', clients);
    const call = callWith(
      'v2',
      client,
      { name: 'sleep', arguments: { ms: SLEEP_MS } },
      { signal: AbortSignal.timeout(SLEEP_MS + 5000) },
    );
    let answeredAt: number | undefined;
    void call.then(
      () => (answeredAt = performance.now()),
      () => {},
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    const termAt = performance.now();
    stopping.signal('SIGTERM');
    // Its GOAWAY takes it out of every scheduler's view at once, while its call goes on: no new session
    // lands on it for the up to 20 s its connection may stay to answer what is in flight.
    await until('no scheduler to list r3', async () => {
      const listed = await Promise.all(cluster.schedulerUrls().map((url) => listedOn(url, 'r3')));
      return listed.every((r) => r === undefined);
    });
    const leftMs = performance.now() - termAt;
    assert.equal(answeredAt, undefined, `r3 left the schedulers' views ${leftMs} ms after SIGTERM, after its call`);
    assert.ok(leftMs < 2000, `r3 left the schedulers' views ${leftMs} ms after SIGTERM`);
    assert.equal(textOf(await call), `slept ${SLEEP_MS}`);
    const { code } = await stopping.exited;
    const stoppedMs = performance.now() - termAt;
    assert.equal(code, 0);
    assert.ok(stoppedMs < SLEEP_MS + 3000, `r3 stopped ${stoppedMs} ms after SIGTERM`);
    assert.ok(stopping.logs.some((l) => l.msg === 'letting the requests in flight finish'));
    const reply = await post(cluster.gatewayUrl(), toolCallBody(8, 'counter'), {
      'mcp-session-id': sessionOf(client),
      'mcp-protocol-version': LEGACY,
    });
    assert.equal(reply.status, 404, reply.text);
  });

  it('stops at once when it holds no sandbox, whatever its drain delay', async () => {
    const idle = await cluster.startRuntime('r2', 0, { args: ['--drain-delay-ms', '60000'] });
    await cluster.waitForRuntimes(['r0', 'r2'], 15_000);
    const termAt = performance.now();
    idle.signal('SIGTERM');
    const { code } = await idle.exited;
    const stoppedMs = performance.now() - termAt;
    assert.equal(code, 0);
    assert.ok(stoppedMs < 5000, `r2 stopped ${stoppedMs} ms after SIGTERM`);
    assert.ok(idle.logs.some((l) => l.msg === 'nothing left to drain'));
  });
});
