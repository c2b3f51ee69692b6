// `switchyard status` and `explain` print what a scheduler URL answers, for
// a person at a terminal or a pipe. A loopback server stands in for the
// scheduler here, answering what a real replica should not, or what a big
// fleet makes of it; the command runs as a child, its stdout a pipe.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server, type ServerResponse } from 'node:http';
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
  /** What the server answers next, by path: JSON text written with a 200, or a function that answers. */
  let answers: Record<string, string | ((res: ServerResponse) => void)> = {};

  before(async () => {
    server = createServer((req, res) => {
      const answer = answers[req.url ?? ''];
      if (answer === undefined) return void res.writeHead(404).end();
      if (typeof answer === 'function') return answer(res);
      res.writeHead(200, { 'content-type': 'application/json' }).end(answer);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );

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

  const NOT_SCHEDULER =
    /^switchyard: http:\/\/127\.0\.0\.1:\d+ does not answer as a Switchyard scheduler \(HTTP 200 to \/api\/(runtimes|schedule)/;
  const malformed = [
    { name: 'an object with no table', path: '/api/runtimes', answer: {} },
    { name: 'a table whose runtime lacks fields', path: '/api/runtimes', answer: runtimesAnswer([{ id: 'rt-1' }]) },
    { name: 'a table with no runtime objects', path: '/api/runtimes', answer: runtimesAnswer([null, 'rt-1']) },
    { name: 'an epoch line with no counts', path: '/api/runtimes', answer: { ...runtimesAnswer([]), counts: null } },
    { name: 'a trace of no stages', path: '/api/schedule', answer: { ok: true, epoch: 7, trace: [null] } },
    {
      name: 'a trace whose candidates are no list',
      path: '/api/schedule',
      answer: { ok: false, epoch: 7, trace: [{ stage: 'Class', before: 1, after: 0, candidates: 'rt-1' }] },
    },
  ];
  for (const c of malformed) {
    it(`says the URL is no scheduler, exit 1, for ${c.name}`, async () => {
      answers = { [c.path]: JSON.stringify(c.answer) };
      const command = c.path === '/api/schedule' ? ['explain', '--class', 'demo', '--process', 'p1'] : ['status'];
      const { code, stdout, stderr } = await runCli([...command, '--scheduler', url]);
      assert.equal(code, 1, stderr);
      assert.equal(stdout, '');
      assert.match(stderr, NOT_SCHEDULER);
    });
  }

  it('names the first field of the answer that is wrong, and only that one', async () => {
    const broken = { ...runtime('rt-1'), owner: 7, classes: 'demo', processes: null };
    answers = { '/api/runtimes': JSON.stringify(runtimesAnswer([broken])) };
    const { code, stderr } = await runCli(['status', '--scheduler', url]);
    assert.equal(code, 1, stderr);
    assert.match(stderr, NOT_SCHEDULER);
    assert.match(stderr, /\(HTTP 200 to \/api\/runtimes: runtimes\[0\]\.classes: [^\n]*expected array[^\n]*\): pass /);
    assert.doesNotMatch(stderr, /owner|processes/);
    assert.equal(stderr.trimEnd().split('\n').length, 1, stderr);
  });

  it('writes control characters in the wrong field it names as escapes', async () => {
    const broken = { ...runtime('rt-1'), idleWeight: { [HOSTILE.repeat(100)]: 'x' } };
    answers = { '/api/runtimes': JSON.stringify(runtimesAnswer([broken])) };
    const { code, stderr } = await runCli(['status', '--scheduler', url]);
    assert.equal(code, 1, stderr);
    assert.match(stderr, /: runtimes\[0\]\.idleWeight\.x\\u001b\]0;owned/);
    assert.ok(!steers(stderr), stderr);
    assert.ok(stderr.length < 2000, stderr);
  });

  it('says the answer broke off, not that the URL is no scheduler, when it stalls half-way', async () => {
    answers = {
      '/api/runtimes': (res) => res.writeHead(200, { 'content-type': 'application/json' }).write('{"runtimes":['),
    };
    const { code, stderr } = await runCli(['status', '--scheduler', url]);
    assert.equal(code, 1, stderr);
    assert.match(stderr, /^switchyard: http:\/\/127\.0\.0\.1:\d+ broke off its answer to \/api\/runtimes: /);
    assert.doesNotMatch(stderr, /does not answer as a Switchyard scheduler/);
  });

  it('says the URL is no scheduler, not that it cannot be reached, at a status outside 200-599', async () => {
    // A web Response cannot be made with such a status; fetch gave one all the same, and the readers tell it so.
    answers = { '/api/runtimes': (res) => res.writeHead(999, { 'content-type': 'application/json' }).end('{}') };
    const { code, stderr } = await runCli(['status', '--scheduler', url]);
    assert.equal(code, 1, stderr);
    assert.match(stderr, /does not answer as a Switchyard scheduler \(HTTP 999 to \/api\/runtimes\)/);
    assert.doesNotMatch(stderr, /cannot reach/);
  });

  /** Escape sequences that retitle the window and clear the screen, and line breaks that forge a row. */
  const HOSTILE = 'x\u001b]0;owned\u0007\u001b[2J\r\nrt-forged  available';
  /** True when `text` holds what a terminal acts on: a control character but the line feeds the command writes. */
  const steers = (text: string): boolean => /[\p{Cc}\u2028\u2029]/u.test(text.replaceAll('\n', ''));

  it('writes control characters in what the scheduler answers as escapes, in status', async () => {
    const evil = { ...runtime(`rt-${HOSTILE}`), owner: HOSTILE, classes: [HOSTILE], idleWeight: { [HOSTILE]: 1 } };
    answers = {
      '/api/runtimes': JSON.stringify({
        ...runtimesAnswer([evil, runtime('rt-2')], `s0${HOSTILE}`),
        leader: { id: HOSTILE, url: HOSTILE },
      }),
    };
    const { code, stdout, stderr } = await runCli(['status', '--scheduler', url]);
    assert.equal(code, 0, stderr);
    assert.ok(!steers(stdout), stdout);
    assert.doesNotMatch(stdout, /^rt-forged/m);
    assert.match(stdout, /^rt-x\\u001b\]0;owned\\u0007\\u001b\[2J\\u000d\\u000art-forged {2}available +/m);
    assert.match(stdout, /^rt-2 /m);
  });

  it('writes control characters in what the scheduler answers as escapes, in explain', async () => {
    const stage = { stage: HOSTILE, before: 2, after: 1, candidates: [HOSTILE, 'rt-2'], note: HOSTILE };
    const decisions = [
      { ok: true, runtime: HOSTILE, source: HOSTILE, epoch: 7, trace: [stage] },
      { ok: false, epoch: 7, trace: [stage], unschedulable: { stage: HOSTILE, code: HOSTILE, message: HOSTILE } },
    ];
    for (const decision of decisions) {
      answers = { '/api/schedule': JSON.stringify(decision) };
      const { stdout, stderr } = await runCli(['explain', '--class', 'demo', '--process', 'p1', '--scheduler', url]);
      assert.match(stdout, /\\u001b\]0;owned/, stderr);
      assert.ok(!steers(stdout), stdout);
      assert.doesNotMatch(stdout, /^rt-forged/m);
    }
    for (const status of [400, 503]) {
      answers = { '/api/schedule': (res) => res.writeHead(status).end(JSON.stringify({ error: HOSTILE })) };
      const { stdout, stderr } = await runCli(['explain', '--class', 'demo', '--process', 'p1', '--scheduler', url]);
      assert.match(stdout + stderr, /\\u001b\]0;owned/);
      assert.ok(!steers(stdout + stderr), stdout + stderr);
      assert.doesNotMatch(stdout + stderr, /^rt-forged/m);
    }
  });
});
