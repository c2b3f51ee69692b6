// `switchyard status` prints an epoch line (epoch, counts) and a runtime
// table; both must describe the same epoch. Read in two requests, a commit
// between them (a runtime joining) paired one epoch's line with the next
// epoch's table. A pass-through on loopback sits between the command and a
// real replica and holds the table's request until a second runtime has
// joined, so such a commit falls between the requests every time.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startRuntimeNode, type RuntimeNode } from '@switchyard/runtime';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { createMetrics } from '@switchyard/service';
import { runCli, startOneReplica, until } from './support.ts';

const JOIN_TOKEN = 'status-join-token-0123456789';
const quiet = { debug() {}, info() {}, warn() {}, error() {} };

interface Listed {
  epoch: number | null;
  runtimes: Array<{ id: string }>;
}

/** What the replica lists now, read straight from it. */
async function listed(replica: SchedulerReplica): Promise<Listed> {
  return (await (await fetch(`${replica.url}/api/runtimes`)).json()) as Listed;
}

/**
 * Forwards every request to `upstream`; `onRequest` may hold one (its
 * promise) before it is forwarded, and `rewrite` may change a JSON answer.
 * Records each answer forwarded, by path.
 */
async function startPassThrough(
  upstream: string,
  onRequest: (path: string) => Promise<void>,
  rewrite: (path: string, body: Record<string, unknown>) => Record<string, unknown> = (_path, body) => body,
): Promise<{ url: string; answers: Array<{ path: string; body: Record<string, unknown> }>; close(): Promise<void> }> {
  const answers: Array<{ path: string; body: Record<string, unknown> }> = [];
  const server = http.createServer((req, res) => {
    const path = req.url ?? '/';
    void (async () => {
      await onRequest(path);
      const answer = await fetch(`${upstream}${path}`, { signal: AbortSignal.timeout(5000) });
      const body = rewrite(path, (await answer.json()) as Record<string, unknown>);
      answers.push({ path, body });
      res.writeHead(answer.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    })().catch((error: unknown) => {
      res.writeHead(502, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: String(error) }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    answers,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The epoch, the runtimes count and the table's runtime ids that `status` printed. */
function printed(stdout: string): { epoch: number; count: number; rows: string[] } {
  const epoch = /^epoch: +(\d+) /m.exec(stdout)?.[1];
  const count = /^runtimes: (\d+) /m.exec(stdout)?.[1];
  assert.ok(epoch !== undefined && count !== undefined, stdout);
  const table = stdout.slice(stdout.indexOf('RUNTIME '));
  const rows = table
    .split('\n')
    .slice(1)
    .map((line) => line.split(' ')[0]!)
    .filter((id) => id !== '');
  return { epoch: Number(epoch), count: Number(count), rows };
}

describe('switchyard status while epochs are committed', () => {
  let replica: SchedulerReplica;
  const nodes: RuntimeNode[] = [];
  const closers: Array<() => Promise<void>> = [];

  /** Starts a runtime and resolves once the replica's latest epoch lists it. */
  async function join(id: string): Promise<void> {
    const node = await startRuntimeNode({
      runtimeId: id,
      schedulerUrl: replica.url,
      joinToken: JOIN_TOKEN,
      classes: { demo: { engine: 'builtin' } },
      sandboxesMax: 4,
      sessionIdleMs: 60_000,
      logger: quiet,
      metrics: createMetrics('runtime'),
    });
    nodes.push(node);
    await until(`${id} in the latest epoch`, async () => (await listed(replica)).runtimes.some((r) => r.id === id));
  }

  before(async () => {
    replica = await startOneReplica({ joinTokens: () => [JOIN_TOKEN] });
    await join('rt-1');
  });
  after(async () => {
    for (const close of closers) await close();
    await Promise.all(nodes.map((n) => n.close()));
    await replica?.close();
  });

  it('prints the epoch line of the epoch its table was read from', async () => {
    let held = false;
    const front = await startPassThrough(replica.url, async (path) => {
      // The first table read waits for a commit: a runtime joining.
      if (path !== '/api/runtimes' || held) return;
      held = true;
      await join('rt-2');
    });
    closers.push(front.close);
    const { code, stdout, stderr } = await runCli(['status', '--scheduler', front.url]);
    assert.equal(code, 0, stderr);
    const table = front.answers.find((a) => a.path === '/api/runtimes');
    assert.ok(table, 'the table was read');
    const shown = printed(stdout);
    assert.deepEqual(shown.rows, ['rt-1', 'rt-2'], stdout);
    assert.equal(shown.epoch, table.body.epoch, `the epoch line names the table's epoch\n${stdout}`);
    assert.equal(shown.count, 2, `the runtimes count is the table's\n${stdout}`);
    assert.doesNotMatch(stdout, /^warning:/m);
  });

  it('reads a scheduler of an earlier release again until its epoch line and table agree', async () => {
    let held = false;
    // Such a scheduler's table carries its epoch number only; its epoch line is read apart, and the
    // first such read waits for a commit here.
    const front = await startPassThrough(
      replica.url,
      async (path) => {
        if (path !== '/api/epoch' || held) return;
        held = true;
        await join('rt-3');
      },
      (path, body) => (path === '/api/runtimes' ? { epoch: body.epoch, runtimes: body.runtimes } : body),
    );
    closers.push(front.close);
    const { code, stdout, stderr } = await runCli(['status', '--scheduler', front.url]);
    assert.equal(code, 0, stderr);
    const tables = front.answers.filter((a) => a.path === '/api/runtimes');
    assert.ok(tables.length >= 2, `the table was read again (${tables.length} reads)`);
    const shown = printed(stdout);
    assert.deepEqual(shown.rows, ['rt-1', 'rt-2', 'rt-3'], stdout);
    assert.equal(shown.epoch, tables.at(-1)!.body.epoch, stdout);
    assert.equal(shown.count, 3, stdout);
    assert.doesNotMatch(stdout, /^warning:/m);
  });
});
