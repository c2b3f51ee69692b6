import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { DRAINING_METADATA_KEY } from '@switchyard/protocol';
import { RuntimeStateStore, createSidecarHandler } from '../src/index.ts';
import { startServer } from './helpers.ts';
import type { TestServer } from './helpers.ts';

let server: TestServer;
let store: RuntimeStateStore;

before(async () => {
  server = await startServer((_req, res) => res.end());
});
after(() => server.close());

function fresh(): void {
  store = new RuntimeStateStore({ seqStart: 0 });
  store.addThread('p0', 't0');
  store.flush();
  server.handler = createSidecarHandler(store);
}

interface Case {
  readonly name: string;
  readonly method: string;
  readonly path: string;
  readonly body?: string;
  readonly status: number;
  readonly error?: RegExp;
  readonly then?: (s: RuntimeStateStore) => void;
}

const CASES: Case[] = [
  {
    name: 'POST /processes/:pid adds a process',
    method: 'POST',
    path: '/processes/p1',
    status: 204,
    then: (s) => assert.deepEqual(s.snapshot().processes, ['p0', 'p1']),
  },
  {
    name: 'POST of an existing process is an idempotent 204',
    method: 'POST',
    path: '/processes/p0',
    status: 204,
    then: (s) => {
      s.flush();
      assert.equal(s.seq, 1, 'no batch was emitted');
    },
  },
  {
    name: 'DELETE /processes/:pid removes the process and its threads',
    method: 'DELETE',
    path: '/processes/p0',
    status: 204,
    then: (s) => assert.deepEqual(s.snapshot(), { processes: [], threads: [], idleWeight: {}, metadata: {} }),
  },
  {
    name: 'POST /processes/:pid/threads/:tid adds a thread',
    method: 'POST',
    path: '/processes/p0/threads/t1',
    status: 204,
    then: (s) => assert.equal(s.snapshot().threads.length, 2),
  },
  {
    name: 'DELETE /processes/:pid/threads/:tid removes a thread and keeps the process',
    method: 'DELETE',
    path: '/processes/p0/threads/t0',
    status: 204,
    then: (s) => assert.deepEqual(s.snapshot().processes, ['p0']),
  },
  {
    name: 'percent-encoded ids are decoded before validation',
    method: 'POST',
    path: '/processes/a%3Ab',
    status: 204,
    then: (s) => assert.ok(s.snapshot().processes.includes('a:b')),
  },
  {
    name: 'PUT /weight replaces the idle weight',
    method: 'PUT',
    path: '/weight',
    body: '{"sandboxes":3}',
    status: 204,
    then: (s) => assert.deepEqual(s.snapshot().idleWeight, { sandboxes: 3 }),
  },
  {
    name: 'PUT /metadata replaces the metadata',
    method: 'PUT',
    path: '/metadata',
    body: '{"zone":"eu-1"}',
    status: 204,
    then: (s) => assert.deepEqual(s.snapshot().metadata, { zone: 'eu-1' }),
  },
  {
    name: 'POST /drain reports no idle weight from then on, and says why in the metadata',
    method: 'POST',
    path: '/drain',
    status: 204,
    then: (s) => {
      s.setIdleWeight({ sandboxes: 5 });
      assert.deepEqual(s.snapshot().idleWeight, { sandboxes: 0 });
      assert.deepEqual(s.snapshot().metadata, { [DRAINING_METADATA_KEY]: 'true' });
    },
  },
  { name: 'a bad pid is a 400 naming pid', method: 'POST', path: '/processes/a%20b', status: 400, error: /^pid: / },
  {
    name: 'a bad tid is a 400 naming tid',
    method: 'POST',
    path: '/processes/p0/threads/' + 'x'.repeat(129),
    status: 400,
    error: /^tid: /,
  },
  { name: 'malformed JSON is a 400', method: 'PUT', path: '/weight', body: '{"a":', status: 400, error: /not JSON/ },
  {
    name: 'a negative weight is a 400 naming the dimension',
    method: 'PUT',
    path: '/weight',
    body: '{"cpu":-1}',
    status: 400,
    error: /cpu/,
  },
  {
    // It matches the key pattern, so the pattern's message would not say why it is refused.
    name: 'a __proto__ metadata key is a 400 saying why, and the metadata stays as it was',
    method: 'PUT',
    path: '/metadata',
    body: '{"zone":"eu-1","__proto__":"x"}',
    status: 400,
    error: /__proto__: '__proto__' cannot be a key: JavaScript objects take it for their prototype/,
    then: (s) => assert.deepEqual(s.snapshot().metadata, {}),
  },
  {
    name: 'a body over 64 KiB is a 413',
    method: 'PUT',
    path: '/metadata',
    body: JSON.stringify({ k: 'x'.repeat(70_000) }),
    status: 413,
    error: /body over 65536 bytes/,
  },
  { name: 'an unknown route is a 404', method: 'GET', path: '/nope', status: 404, error: /no such route/ },
  { name: 'a wrong method is a 405', method: 'GET', path: '/weight', status: 405, error: /use PUT/ },
];

describe('sidecar API', () => {
  for (const c of CASES) {
    it(c.name, async () => {
      fresh();
      const init: RequestInit = { method: c.method };
      if (c.body !== undefined) Object.assign(init, { body: c.body, headers: { 'content-type': 'application/json' } });
      const response = await fetch(server.url + c.path, init);
      assert.equal(response.status, c.status);
      if (c.error) assert.match((await response.json()).error, c.error);
      else await response.arrayBuffer();
      c.then?.(store);
    });
  }

  it('GET /state answers the canonical snapshot', async () => {
    fresh();
    store.setIdleWeight({ sandboxes: 2 });
    const response = await fetch(`${server.url}/state`);
    assert.equal(response.status, 200);
    assert.deepEqual(await response.json(), {
      processes: ['p0'],
      threads: [{ process: 'p0', thread: 't0' }],
      idleWeight: { sandboxes: 2 },
      metadata: {},
    });
  });

  it('a 405 lists the allowed methods', async () => {
    fresh();
    const response = await fetch(`${server.url}/processes/p1`, { method: 'PUT' });
    assert.equal(response.status, 405);
    assert.equal(response.headers.get('allow'), 'POST, DELETE');
    await response.arrayBuffer();
  });

  it('a chunked body over the limit is cut off with 413 without a content-length', async () => {
    fresh();
    const { port } = new URL(server.url);
    const status = await new Promise<number>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path: '/weight', method: 'PUT' }, (res) => {
        res.resume();
        resolve(res.statusCode!);
      });
      req.on('error', reject);
      const chunk = 'x'.repeat(16 * 1024);
      for (let i = 0; i < 5; i++) req.write(chunk);
      req.end();
    });
    assert.equal(status, 413);
  });
});
