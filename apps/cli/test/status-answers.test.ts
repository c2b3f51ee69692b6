// `switchyard status` and `explain` print what a scheduler URL answers, for
// a person at a terminal or a pipe. A loopback server stands in for the
// scheduler here, answering what a real replica should not, or what a big
// fleet makes of it; the command runs as a child, its stdout a pipe.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { runCli } from './support.ts';

/** `/api/runtimes` as a replica of this release answers it, with `runtimes` listed. */
function runtimesAnswer(runtimes: readonly unknown[], replica = 's0'): Record<string, unknown> {
  return {
    replica,
    epoch: 7,
    epochAgeMs: 20,
    term: 1,
    isLeader: true,
    leader: { id: replica, url: 'http://127.0.0.1:7070' },
    counts: { runtimes: runtimes.length, processes: 0, threads: 0 },
    runtimes,
  };
}

function runtime(id: string): Record<string, unknown> {
  return {
    id,
    owner: 's0',
    available: true,
    classes: ['demo'],
    idleWeight: { sandboxes: 3 },
    metadata: {},
    processes: 0,
    threads: 0,
    version: '1.0.0',
    generation: 1,
  };
}

describe('switchyard status and explain, whatever the scheduler URL answers', () => {
  let server: Server;
  let url = '';
  /** What the server answers next, by path: the JSON text written with a 200. */
  let answers: Record<string, string> = {};

  before(async () => {
    server = createServer((req, res) => {
      const text = answers[req.url ?? ''];
      if (text === undefined) return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'application/json' }).end(text);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('prints every runtime of a big fleet, when its output goes to a pipe', async () => {
    // 700 KB of table: far past a pipe's buffer, within what runCli keeps of the output.
    const ids = Array.from({ length: 10_000 }, (_, i) => `rt-${i}`);
    answers = { '/api/runtimes': JSON.stringify(runtimesAnswer(ids.map(runtime))) };
    const { code, stdout, stderr } = await runCli(['status', '--scheduler', url], 60_000);
    assert.equal(code, 0, stderr);
    const rows = stdout.trimEnd().split('\n').slice(-ids.length);
    assert.equal(rows.length, ids.length);
    assert.deepEqual(
      rows.map((row) => row.split(' ')[0]),
      ids,
    );
  });
});
