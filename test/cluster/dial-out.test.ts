// Acceptance: a runtime that can only dial out. The runtime process runs in a
// network namespace whose inbound NEW connections nftables drops; it reaches
// a scheduler process bound on the host's end of a veth pair, registers,
// serves traffic through the tunnel it opened, and its state changes (made
// through its sidecar API, which binds 127.0.0.1 inside the namespace) show
// on the scheduler promptly. Root, iproute2 and nftables only; otherwise the
// suite is skipped with the reason.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createConnection, createServer } from 'node:net';
import { createInterface } from 'node:readline';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { createDialOutNamespace, dialOutUnavailable, type DialOutNamespace } from './netns.ts';

const RUNTIME = 'edge';
/** Ports inside the namespace: it is new and empty, so fixed numbers cannot collide. */
const SIDECAR_PORT = 7181;
const PROBE_PORT = 7182;
const CHANGE_VISIBLE_MS = 200;

const unavailable = dialOutUnavailable();
if (unavailable) console.log(`# dial-out suite skipped: ${unavailable}`);

type ConnectOutcome = 'connected' | 'timeout' | `error ${string}`;

/** Opens a TCP connection and says how it went; a dropped SYN shows as a timeout, not a refusal. */
function tryConnect(host: string, port: number, timeoutMs: number): Promise<ConnectOutcome> {
  return new Promise((resolve) => {
    const socket = createConnection({ host, port });
    const done = (outcome: ConnectOutcome): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(outcome);
    };
    const timer = setTimeout(() => done('timeout'), timeoutMs);
    socket.once('connect', () => done('connected'));
    socket.once('error', (error: NodeJS.ErrnoException) => done(`error ${error.code ?? error.message}`));
  });
}

/** A port free on `host` now (bound, then released), for a process that must be told its port up front. */
async function freePort(host: string): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Runs a Node program inside the namespace and resolves once it printed its first line. */
async function spawnInNamespace(ns: DialOutNamespace, script: string): Promise<ChildProcess> {
  const command = [...ns.wrapper, process.execPath, '--input-type=module', '-e', script];
  const child = spawn(command[0]!, command.slice(1), { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout! });
  await new Promise<void>((resolve, reject) => {
    lines.once('line', () => resolve());
    child.once('exit', (code) => reject(new Error(`namespace helper exited (${code}) before starting`)));
  });
  return child;
}

/**
 * The sidecar's client inside the namespace: one JSON command per stdin line
 * (`{method, path, body?}`), one `{status}` line back, in order.
 */
const SIDECAR_CLIENT = `
  import { createInterface } from 'node:readline';
  console.log('ready');
  for await (const line of createInterface({ input: process.stdin })) {
    const { method, path, body } = JSON.parse(line);
    try {
      const res = await fetch('http://127.0.0.1:${SIDECAR_PORT}' + path, {
        method,
        headers: { 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      await res.arrayBuffer();
      console.log(JSON.stringify({ status: res.status }));
    } catch (error) {
      console.log(JSON.stringify({ status: 0, error: String(error) }));
    }
  }
`;

const probeListener = (address: string): string => `
  import { createServer } from 'node:net';
  createServer((socket) => {
    socket.on('error', () => {});
    socket.end('probe');
  }).listen(${PROBE_PORT}, '${address}', () => console.log('listening'));
`;

/** Resolves with the time `probe` first held, polling every 5 ms (the bound under test is 200 ms). */
async function timeWhen(what: string, probe: () => Promise<boolean>, timeoutMs: number): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (await probe()) return performance.now();
    assert.ok(performance.now() < deadline, `${what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

interface RuntimeView {
  readonly runtime: { available: boolean; idleWeight: Record<string, number> };
  readonly processes: string[];
  readonly threads: Array<{ process: string; thread: string }>;
}

describe('a runtime that can only dial out (network namespace, inbound NEW dropped)', { skip: unavailable }, () => {
  let ns: DialOutNamespace | undefined;
  let cluster: TestCluster | undefined;
  let listener: ChildProcess | undefined;
  let sidecar: ChildProcess | undefined;
  let schedulerUrl: string;
  let controlOutcome: ConnectOutcome;
  let sidecarReplies: AsyncIterator<string>;

  before(async () => {
    ns = createDialOutNamespace();
    // Control: before the rule, the host reaches a listener in the namespace, so a later failure is the rule's doing.
    listener = await spawnInNamespace(ns, probeListener(ns.nsAddress));
    controlOutcome = await tryConnect(ns.nsAddress, PROBE_PORT, 2000);
    ns.dropInbound();

    const port = await freePort(ns.hostAddress);
    schedulerUrl = `http://${ns.hostAddress}:${port}`;
    cluster = await startCluster({
      schedulers: 1,
      runtimes: 0,
      gateways: 0,
      // Later flags win: the replica binds only the host's end of the pair and advertises that address.
      schedulerArgs: ['--host', ns.hostAddress, '--port', String(port), '--advertise-url', schedulerUrl],
      runtimeArgs: ['--sidecar-port', String(SIDECAR_PORT)],
    });
    await cluster.startRuntime(RUNTIME, 0, { schedulerUrl, wrapper: ns.wrapper });
    await cluster.waitForRuntimes([RUNTIME], 15_000);
    sidecar = await spawnInNamespace(ns, SIDECAR_CLIENT);
    sidecarReplies = createInterface({ input: sidecar.stdout! })[Symbol.asyncIterator]();
    // The client's first fetch loads and connects undici; that start-up cost is not the propagation under test.
    await sidecarCall('GET', '/state', undefined, 200);
    // One untimed round trip through sidecar, watch stream, epoch and API, so first-use compilation on the way
    // is not charged to the first timed change.
    await sidecarCall('POST', '/processes/warm-up');
    await timeWhen('the warm-up process visible', async () => (await view()).processes.includes('warm-up'), 10_000);
    await sidecarCall('DELETE', '/processes/warm-up');
    await timeWhen('the warm-up process gone', async () => !(await view()).processes.includes('warm-up'), 10_000);
  });

  after(async () => {
    sidecar?.stdin?.end();
    for (const child of [sidecar, listener]) {
      if (child && child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGKILL');
        await exited;
      }
    }
    await cluster?.stop();
    ns?.close();
  });

  async function sidecarCall(method: string, path: string, body?: unknown, status = 204): Promise<void> {
    sidecar!.stdin!.write(`${JSON.stringify({ method, path, body })}\n`);
    const next = await sidecarReplies.next();
    assert.ok(!next.done, 'the sidecar client ended');
    const reply = JSON.parse(next.value) as { status: number; error?: string };
    assert.equal(reply.status, status, `sidecar ${method} ${path}: ${reply.error ?? reply.status}`);
  }

  async function view(): Promise<RuntimeView> {
    const res = await fetch(`${schedulerUrl}/api/runtime/${RUNTIME}`, { signal: AbortSignal.timeout(2000) });
    assert.equal(res.status, 200);
    return (await res.json()) as RuntimeView;
  }

  it('drops a connection the host opens into the namespace, which succeeded before the rule', async () => {
    const droppedBefore = ns!.droppedPackets();
    const outcome = await tryConnect(ns!.nsAddress, PROBE_PORT, 1000);
    assert.equal(controlOutcome, 'connected', 'control: the listener was reachable before the rule');
    assert.equal(outcome, 'timeout', 'the SYN vanished (a refusal would mean something answered)');
    assert.equal(listener!.exitCode, null, 'the listener in the namespace is still there');
    assert.ok(ns!.droppedPackets() > droppedBefore, 'the drop rule counted the attempt');
  });

  it('registers with a scheduler bound on the host end of the pair and answers through /api/proxy/<id>/healthz', async () => {
    const list = await fetch(`${schedulerUrl}/api/runtimes`);
    const { runtimes } = (await list.json()) as { runtimes: Array<{ id: string; available: boolean; owner: string }> };
    assert.deepEqual(
      runtimes.map((r) => [r.id, r.available, r.owner]),
      [[RUNTIME, true, 's0']],
    );
    const health = await fetch(`${schedulerUrl}/api/proxy/${RUNTIME}/healthz`, { signal: AbortSignal.timeout(2000) });
    assert.equal(health.status, 200);
    await health.arrayBuffer();
  });

  const changes: ReadonlyArray<{
    name: string;
    method: string;
    path: string;
    body?: unknown;
    shows: (v: RuntimeView) => boolean;
  }> = [
    {
      name: 'a process added',
      method: 'POST',
      path: '/processes/sidecar-p1',
      shows: (v) => v.processes.includes('sidecar-p1'),
    },
    {
      name: 'a thread added',
      method: 'POST',
      path: '/processes/sidecar-p1/threads/sidecar-t1',
      shows: (v) => v.threads.some((t) => t.process === 'sidecar-p1' && t.thread === 'sidecar-t1'),
    },
    {
      name: 'an idle weight set',
      method: 'PUT',
      path: '/weight',
      body: { sandboxes: 7 },
      shows: (v) => v.runtime.idleWeight.sandboxes === 7,
    },
    {
      name: 'a process removed',
      method: 'DELETE',
      path: '/processes/sidecar-p1',
      shows: (v) => !v.processes.includes('sidecar-p1') && !v.threads.some((t) => t.process === 'sidecar-p1'),
    },
  ];
  for (const change of changes) {
    it(`shows ${change.name} through the sidecar at GET /api/runtime/:id within ${CHANGE_VISIBLE_MS} ms`, async () => {
      assert.equal(change.shows(await view()), false, 'the change is not visible before it is made');
      // The change is made once the sidecar answers; the call itself is reported alongside, not counted.
      const startedAt = performance.now();
      await sidecarCall(change.method, change.path, change.body);
      const answeredAt = performance.now();
      const visibleAt = await timeWhen(`${change.name} visible`, async () => change.shows(await view()), 5000);
      const elapsedMs = visibleAt - answeredAt;
      console.log(
        `# ${change.name}: visible on the scheduler after ${elapsedMs.toFixed(0)} ms ` +
          `(sidecar call ${(answeredAt - startedAt).toFixed(0)} ms)`,
      );
      assert.ok(elapsedMs <= CHANGE_VISIBLE_MS, `${change.name} took ${elapsedMs.toFixed(0)} ms`);
    });
  }
});
