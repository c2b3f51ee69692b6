// Every request the scheduler API table of docs/protocol.md §7 lists is one
// a scheduler serves: asked of a replica holding a runtime's tunnel, with
// the table's placeholders filled in, none gets the replica's 404 for a path
// it has no route for, and each gets the status the table implies (a relay
// connection its 101). The replica and runtime run in-process, as the live
// page's tests run them. Each request of the sidecar table (§4), with the
// body it gives, gets the status that table gives.
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { RuntimeStateStore, createSidecarHandler } from '@switchyard/agent';
import type { RuntimeNode } from '@switchyard/runtime';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { epochOf, startReplicas, startRuntime, until } from '../ui/cluster.ts';

const doc = readFileSync(join(import.meta.dirname, '../../docs/protocol.md'), 'utf8');

/** `METHOD /path` of each row of the §7 table (a bare path is a GET; `ANY` is asked as GET). */
function documented(): { method: string; path: string }[] {
  const section = doc.slice(doc.indexOf('## 7. Scheduler HTTP API'), doc.indexOf('\n### ', doc.indexOf('## 7.')));
  const requests = [];
  for (const [, cell] of section.matchAll(/^\| ((?:`[^`]+`(?:, )?)+) +\|/gm)) {
    for (const [, method, path] of cell!.matchAll(/`(?:([A-Z]+) )?(\/[^`]*)`/g)) {
      requests.push({ method: method === undefined || method === 'ANY' ? 'GET' : method, path: path! });
    }
  }
  return requests;
}

let replica: SchedulerReplica;
let runtime: RuntimeNode;
let epoch = 0;

before(async () => {
  [replica] = (await startReplicas(1)) as [SchedulerReplica];
  runtime = await startRuntime('r0', replica.url);
  // Available, not only listed: a runtime is listed as it connects, and placeable once its state says
  // it is available (a moment later, longer on a loaded machine); /api/schedule is asked first.
  await until('the replica to list r0 as available', async () => (await availableIds(replica.url)).includes('r0'));
  epoch = (await epochOf(replica.url)).epoch!;
});
after(async () => {
  await runtime?.close();
  await replica?.close();
});

async function availableIds(url: string): Promise<string[]> {
  const body = (await (await fetch(`${url}/api/runtimes`)).json()) as {
    runtimes: Array<{ id: string; available: boolean }>;
  };
  return body.runtimes.filter((r) => r.available).map((r) => r.id);
}

/** The path with its placeholders filled: the runtime r0, the latest epoch, the runtime's /healthz. */
function filled(path: string): string {
  return path
    .replace(/:runtime|:id(?=$)/, 'r0')
    .replace(/\/epoch\/:id\//, `/epoch/${epoch}/`)
    .replace(/\/\*$/, '/healthz');
}

/** Status and body of `method path`; a relay asks for its upgrade, and a 101 ends the exchange. */
function ask(method: string, path: string): Promise<{ status: number; body: string }> {
  const relay = path.startsWith('/api/relay/');
  const body = method === 'POST' ? JSON.stringify({ class: 'demo', processId: 'p1', threadId: 't1' }) : undefined;
  return new Promise((resolve, reject) => {
    const req = request(`${replica.url}${path}`, {
      method,
      headers: {
        ...(relay ? { connection: 'Upgrade', upgrade: 'switchyard-relay' } : {}),
        ...(body ? { 'content-type': 'application/json' } : {}),
      },
      signal: AbortSignal.timeout(5000),
    });
    req.once('upgrade', (res, socket) => {
      socket.destroy();
      resolve({ status: res.statusCode!, body: '' });
    });
    req.once('response', (res) => {
      // An event stream never ends: its status and first bytes say enough.
      if (res.headers['content-type']?.startsWith('text/event-stream')) {
        res.destroy();
        return resolve({ status: res.statusCode!, body: '' });
      }
      let text = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      res.once('end', () => resolve({ status: res.statusCode!, body: text }));
    });
    req.once('error', reject);
    req.end(body);
  });
}

it('reads the §7 table (the check below has something to compare)', () => {
  const paths = documented().map((r) => `${r.method} ${r.path}`);
  assert.ok(paths.length >= 10, paths.join(', '));
  assert.ok(paths.includes('POST /api/schedule') && paths.includes('GET /metrics'), paths.join(', '));
});

it('a scheduler serves every request the §7 table lists, and a path it has no route for is its 404', async () => {
  const unrouted = await ask('GET', '/api/no-such-thing');
  assert.equal(unrouted.status, 404);
  assert.match(unrouted.body, /no route for/);
  const wrong = [];
  for (const { method, path } of documented()) {
    const { status, body } = await ask(method, filled(path));
    const expected = path.startsWith('/api/relay/') ? 101 : 200;
    if (status !== expected) wrong.push(`${method} ${path} (${filled(path)}): ${status} ${body.slice(0, 120)}`);
  }
  assert.deepEqual(wrong, []);
});

/** `METHOD /path`, body and status of each row of the §4 sidecar table. */
function sidecarRows(): { method: string; path: string; body?: string; status: number }[] {
  const section = doc.slice(doc.indexOf('## 4. The sidecar API'), doc.indexOf('## 5.'));
  return [...section.matchAll(/^\| `([A-Z]+) (\/[^`]*)` +\| (?:`([^`]*)`|–) +\| (\d{3})\b[^|]*\|$/gm)].map((m) => ({
    method: m[1]!,
    path: m[2]!,
    ...(m[3] === undefined ? {} : { body: m[3] }),
    status: Number(m[4]),
  }));
}

it('the sidecar answers every request of the §4 table with the status the table gives', async () => {
  const rows = sidecarRows();
  assert.ok(rows.length >= 8, JSON.stringify(rows));
  const server: Server = createServer(createSidecarHandler(new RuntimeStateStore()));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const wrong = [];
    for (const { method, path, body, status } of rows) {
      const url = `${base}${path.replace(':pid', 'p1').replace(':tid', 't1')}`;
      const res = await fetch(url, { method, body, signal: AbortSignal.timeout(5000) });
      const text = await res.text();
      if (res.status !== status)
        wrong.push(`${method} ${path}: ${res.status} ${text.slice(0, 120)}, the table says ${status}`);
    }
    assert.deepEqual(wrong, []);
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});
