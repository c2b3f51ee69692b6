import assert from 'node:assert/strict';
import type { Client } from '@modelcontextprotocol/client';
import { after, afterEach, before, describe, it } from 'node:test';
import { ManualClock } from '@switchyard/clock/testing';
import type { SandboxHost } from '@switchyard/sandbox';
import { alive, descendants } from './fixtures/children.ts';
import { connect, type TestClient } from './fixtures/clients.ts';
import { RecordingReporter, captureLogger, serveHttp1, type Served, testHost } from './fixtures/harness.ts';

const unruly = new URL('./fixtures/unruly-stdio-server.ts', import.meta.url).pathname;
/** A stdio class running the unruly server in `mode`. */
const unrulyClass = (...args: string[]) => ({
  engine: 'stdio' as const,
  command: process.execPath,
  args: [unruly, ...args],
  expireSeconds: 0,
});
/** Bound on a forwarded call in these tests: a lost answer fails the test here, not after the SDK's 60 s. */
const CALL_TIMEOUT_MS = 10_000;

async function waitFor(what: string, check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('stdio servers that misbehave', () => {
  let host: SandboxHost;
  let served: Served;
  let reporter: RecordingReporter;
  const logger = captureLogger();
  const open: TestClient[] = [];
  const headers = (cls: string, process: string) => ({ 'x-switchyard-class': cls, 'x-switchyard-process': process });

  before(async () => {
    reporter = new RecordingReporter();
    host = testHost({
      runtimeId: 'rt-unruly',
      classes: {
        crash: unrulyClass('crash'),
        // Its own class: the deaths of `crash` sandboxes before it would be logged at debug (one warning per class and 10 s).
        'crash-told': unrulyClass('crash'),
        killed: unrulyClass('killed'),
        flood: unrulyClass('flood'),
        stubborn: unrulyClass('stubborn'),
        garbage: unrulyClass('garbage'),
        exit: unrulyClass('exit'),
        escaped: unrulyClass('escaped'),
        // One line past the 10 MiB a stdout message may take.
        huge: unrulyClass('huge', String(10 * 1024 * 1024 + 1)),
        // Through a shell that does not exec it, as `npx` and `uvx` run servers: the server is a grandchild.
        wrapped: {
          engine: 'stdio',
          command: '/bin/sh',
          args: ['-c', `"${process.execPath}" "${unruly}" stubborn; :`],
          expireSeconds: 0,
        },
      },
      reporter,
      logger,
    });
    served = await serveHttp1(host);
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((c) => c.close().catch(() => undefined)));
  });
  after(async () => {
    await served.close();
    await host.close();
    assert.deepEqual(descendants(), [], 'close() leaves no process behind');
  });

  for (const flavour of ['v2-legacy', 'v2-modern'] as const) {
    it(`${flavour}: a call in flight when the child exits gets a JSON-RPC error at once, and the client goes on`, async () => {
      const process = `crash-${flavour}`;
      const c = await connect(flavour, served.url, served.fetch, headers('crash', process));
      open.push(c);
      const raw = c.raw as Client;
      const started = performance.now();
      await assert.rejects(
        raw.callTool({ name: 'echo', arguments: { text: 'bye' } }, { timeout: CALL_TIMEOUT_MS }),
        (e: Error & { code?: unknown }) => typeof e.code === 'number' && /closed/i.test(e.message),
      );
      assert.ok(performance.now() - started < CALL_TIMEOUT_MS / 2, `answered after ${performance.now() - started} ms`);
      await waitFor('the sandbox to be reported removed', () => !reporter.processes.has(process));
      assert.equal(host.stats().sandboxes, 0);
      assert.equal(host.stats().sessions, 0, 'the session bound to the dead sandbox is closed');
      // The client starts over: legacy after a 404 for its session, modern past the one answer saying it died.
      if (flavour === 'v2-legacy') {
        await assert.rejects(c.listToolNames(), /session not found/);
      }
      const reconnect = () => connect(flavour, served.url, served.fetch, headers('crash', process));
      // Modern: the call in flight may be the one that heard of the death, or the next request is told once.
      const again = await reconnect().catch((e: Error & { data?: { text?: string } }) => {
        assert.match(e.data?.text ?? '', /died/);
        return reconnect();
      });
      open.push(again);
      assert.deepEqual(await again.listToolNames(), ['echo']);
    });
  }

  it('a server that dies while a helper out of its group holds its stderr: the call in flight gets a JSON-RPC error within seconds, and the sandbox goes', async () => {
    const c = await connect('v2-legacy', served.url, served.fetch, headers('escaped', 'escaped-1'));
    open.push(c);
    const named = () =>
      logger.lines
        .filter((l) => l.obj.event === 'sandbox.stderr' && l.obj.class === 'escaped')
        .map((l) => /^unruly: helper pid (\d+)$/.exec(String(l.obj.line))?.[1])
        .find((pid) => pid !== undefined);
    await waitFor('the helper to name itself', () => named() !== undefined);
    const helper = Number(named());
    try {
      const started = performance.now();
      await assert.rejects(
        (c.raw as Client).callTool({ name: 'echo', arguments: {} }, { timeout: CALL_TIMEOUT_MS }),
        (e: Error & { code?: unknown }) => typeof e.code === 'number' && /closed/i.test(e.message),
      );
      assert.ok(performance.now() - started < CALL_TIMEOUT_MS / 2, `answered after ${performance.now() - started} ms`);
      await waitFor('the sandbox to be reported removed', () => !reporter.processes.has('escaped-1'));
      assert.equal(host.stats().sandboxes, 0);
      // What the runtime cannot reach (see watchGroup): the helper lives on, and the pipe with it.
      assert.ok(alive(helper), 'the helper outlived its server');
    } finally {
      if (alive(helper)) process.kill(helper, 'SIGKILL');
    }
  });

  for (const [cls, exitCode, signal] of [
    ['crash-told', 7, null],
    ['killed', null, 'SIGKILL'],
  ] as const) {
    it(`a server that dies (${cls}) is logged with its exit code or signal and its last stderr lines`, async () => {
      const c = await connect('v2-legacy', served.url, served.fetch, headers(cls, `${cls}-told`));
      open.push(c);
      await assert.rejects((c.raw as Client).callTool({ name: 'echo', arguments: {} }, { timeout: CALL_TIMEOUT_MS }));
      const died = () => logger.lines.find((l) => l.obj.event === 'sandbox.died' && l.obj.sandbox === `${cls}-told`);
      await waitFor('the death to be logged', () => died() !== undefined);
      const { obj, level } = died()!;
      assert.equal(level, 'warn');
      assert.equal(obj.class, cls);
      assert.equal(obj.exitCode, exitCode);
      assert.equal(obj.signal, signal);
      const tail = obj.stderrTail as string[];
      assert.match(tail[0]!, /^unruly: pid \d+$/);
      if (cls === 'crash-told') assert.deepEqual(tail.slice(1), ['unruly: about to crash', 'unruly: out of widgets']);
      else assert.equal(tail.length, 1);
    });
  }

  it('a child flooding stderr is read to the end, never blocks, and gets a bounded share of the log', async () => {
    const c = await connect('v2-legacy', served.url, served.fetch, headers('flood', 'flood-1'));
    const raw = c.raw as Client;
    for (let i = 0; i < 20; i++) {
      const result = await raw.callTool(
        { name: 'echo', arguments: { text: `call ${i}` } },
        { timeout: CALL_TIMEOUT_MS },
      );
      assert.deepEqual(result.content, [{ type: 'text', text: `call ${i}` }]);
    }
    await c.close(); // its sandbox expires at once: the child is killed and its stderr ends
    const ofFlood = (event: string) => logger.lines.filter((l) => l.obj.event === event && l.obj.class === 'flood');
    await waitFor('the count of dropped lines', () => ofFlood('sandbox.stderr_dropped').length > 0);
    const logged = ofFlood('sandbox.stderr');
    assert.ok(logged.length <= 100, `${logged.length} stderr lines logged`);
    assert.equal(logged[0]?.obj.line, 'unruly: noise 1');
    const dropped = ofFlood('sandbox.stderr_dropped').reduce((n, l) => n + Number(l.obj.dropped), 0);
    // It wrote 5,000 lines before it answered initialize, and more while it served.
    assert.ok(dropped + logged.length > 5000, `${dropped} dropped`);
  });

  it('a child mixing non-JSON lines into stdout goes on serving: the lines are skipped', async () => {
    const c = await connect('v2-legacy', served.url, served.fetch, headers('garbage', 'garbage-1'));
    open.push(c);
    assert.deepEqual(await c.listToolNames(), ['echo']);
    assert.equal(await c.callText('echo', { text: 'still fine' }), 'still fine');
  });

  // A server that logs to stdout (a common mistake) would otherwise have its lines vanish without a word.
  it('a skipped stdout line is warned of once, with the class and what the server wrote', () => {
    const skipped = logger.lines.filter((l) => l.obj.event === 'sandbox.stdout_skipped' && l.obj.class === 'garbage');
    const warned = skipped.filter((l) => l.level === 'warn');
    assert.equal(warned.length, 1, JSON.stringify(skipped));
    assert.equal(warned[0]!.obj.line, 'not json at all');
    assert.equal(typeof warned[0]!.obj.pid, 'number');
  });

  it('a stdout line past 10 MiB ends the sandbox: the call gets a JSON-RPC error at once, and the client starts over', async () => {
    const c = await connect('v2-legacy', served.url, served.fetch, headers('huge', 'huge-1'));
    open.push(c);
    const started = performance.now();
    await assert.rejects(
      (c.raw as Client).callTool({ name: 'echo', arguments: {} }, { timeout: CALL_TIMEOUT_MS }),
      (e: Error & { code?: unknown }) => typeof e.code === 'number',
    );
    // Reading the line must cost time in proportion to its length: a buffer copied at every chunk blocked the loop for seconds.
    assert.ok(performance.now() - started < 2_000, `answered after ${performance.now() - started} ms`);
    await waitFor('the sandbox to be reported removed', () => !reporter.processes.has('huge-1'));
    await assert.rejects(c.listToolNames(), /session not found/);
    const again = await connect('v2-legacy', served.url, served.fetch, headers('huge', 'huge-1'));
    open.push(again);
    assert.deepEqual(await again.listToolNames(), ['echo']);
  });

  it('a server that exits at once every time: each initialize fails clearly, one start each, and nothing is left', async () => {
    const failed = () => logger.lines.filter((l) => l.obj.event === 'sandbox.start_failed' && l.obj.class === 'exit');
    for (let i = 0; i < 3; i++) {
      await assert.rejects(
        connect('v2-legacy', served.url, served.fetch, headers('exit', 'exit-1')),
        /sandbox \\"exit-1\\" could not start/,
      );
    }
    assert.equal(failed().length, 3, 'one start, and one line, per request');
    // One warning per class and 10 s: the others at debug, with the same fields.
    assert.deepEqual(
      failed().map((l) => l.level),
      ['warn', 'debug', 'debug'],
    );
    // Each says how the server ended and what it last wrote: a few lines, each cut short.
    for (const { obj } of failed()) {
      assert.equal(obj.exitCode, 3);
      assert.equal(obj.signal, null);
      const tail = obj.stderrTail as string[];
      assert.equal(tail.length, 5);
      assert.deepEqual(tail.slice(0, 3), [
        'unruly: reading config 18',
        'unruly: reading config 19',
        'unruly: reading config 20',
      ]);
      assert.match(tail[3]!, /^unruly: x+$/);
      assert.ok(tail[3]!.length <= 512, `a ${tail[3]!.length}-character line`);
      assert.equal(tail[4], 'unruly: no config found, giving up');
    }
    assert.equal(reporter.processes.has('exit-1'), false);
    assert.equal(host.stats().sandboxes, 0);
    assert.equal(host.stats().sessions, 0);
  });

  for (const cls of ['stubborn', 'wrapped'] as const) {
    it(`destroying a sandbox ends its server (${cls}; it ignores stdin EOF and SIGTERM) and all it started, within 5 s`, async () => {
      // The server itself, not a shell that starts it.
      const servers = () =>
        descendants()
          .filter((p) => p.cmdline.split(' ')[1] === unruly)
          .map((p) => p.pid);
      const before = new Set(servers());
      const c = await connect('v2-legacy', served.url, served.fetch, headers(cls, `${cls}-1`));
      assert.deepEqual(await c.listToolNames(), ['echo']);
      const server = servers().find((pid) => !before.has(pid));
      assert.ok(server, 'the server process is found');
      const closed = performance.now();
      await c.close(); // its sandbox expires at once
      try {
        await waitFor('the server to be gone', () => !alive(server), 8_000);
      } finally {
        if (alive(server)) process.kill(server, 'SIGKILL');
      }
      assert.ok(performance.now() - closed < 5_000, `gone after ${performance.now() - closed} ms`);
    });
  }
});

describe('closing a host while a stdio sandbox is being destroyed', () => {
  it('waits for it: no server outlives close(), though it ignores stdin EOF and SIGTERM', async () => {
    const host = testHost({ runtimeId: 'rt-closing', classes: { stubborn: unrulyClass('stubborn') } });
    const served = await serveHttp1(host);
    try {
      const c = await connect('v2-legacy', served.url, served.fetch, {
        'x-switchyard-class': 'stubborn',
        'x-switchyard-process': 'closing-1',
      });
      const server = descendants().find((p) => p.cmdline.split(' ')[1] === unruly)?.pid;
      assert.ok(server, 'the server process is found');
      await c.close(); // its sandbox expires at once: destroying it takes seconds (stdin EOF, SIGTERM ignored)
      assert.equal(host.stats().sandboxes, 0);
      await host.close();
      assert.equal(alive(server), false, 'the server is gone when close() resolves');
    } finally {
      await served.close();
      await host.close();
    }
  });
});

describe('a stdio sandbox still being destroyed', () => {
  it('counts toward sandboxesMax until its server is gone: no more servers run than the limit', async () => {
    const reporter = new RecordingReporter();
    const host = testHost({
      runtimeId: 'rt-dying',
      classes: { stubborn: unrulyClass('stubborn') },
      sandboxesMax: 1,
      reporter,
    });
    const served = await serveHttp1(host);
    const servers = () => descendants().filter((p) => p.cmdline.split(' ')[1] === unruly);
    const headers = (process: string) => ({ 'x-switchyard-class': 'stubborn', 'x-switchyard-process': process });
    try {
      const first = await connect('v2-legacy', served.url, served.fetch, headers('dying-1'));
      const server = servers()[0]?.pid;
      assert.ok(server, 'the server process is found');
      await first.close(); // its sandbox expires at once; its server takes seconds to go (stdin EOF, SIGTERM ignored)
      assert.ok(alive(server), 'the server is still going');
      assert.deepEqual(reporter.weight, { sandboxes: 0 });
      await assert.rejects(connect('v2-legacy', served.url, served.fetch, headers('dying-2')), /sandbox limit reached/);
      assert.equal(servers().length, 1, 'one server at a time');
      await waitFor('the first server to be gone', () => !alive(server), 8_000);
      await waitFor('the idle weight to come back', () => reporter.weight.sandboxes === 1);
      const second = await connect('v2-legacy', served.url, served.fetch, headers('dying-2'));
      assert.deepEqual(await second.listToolNames(), ['echo']);
      await second.close();
    } finally {
      await served.close();
      await host.close();
    }
  });
});

describe('a warm pool of a server that exits at once', () => {
  it('logs its failed start with the exit code and last stderr lines', async () => {
    const logger = captureLogger();
    const host = testHost({
      runtimeId: 'rt-pool-exit',
      classes: { exit: { ...unrulyClass('exit'), warmPool: 1 } },
      logger,
    });
    try {
      const failed = () => logger.lines.find((l) => l.obj.event === 'pool.start_failed');
      await waitFor('the failed start to be logged', () => failed() !== undefined);
      const { obj } = failed()!;
      assert.equal(obj.exitCode, 3);
      assert.equal((obj.stderrTail as string[]).at(-1), 'unruly: no config found, giving up');
      assert.match(String(obj.err), /exited with code 3 before it was ready/);
    } finally {
      await host.close();
    }
  });
});

describe('a server that crashes on every call', () => {
  const CALLS = 5;
  it(`warns of the first death of its class, and logs the other ${CALLS - 1} at debug`, async () => {
    const logger = captureLogger();
    const host = testHost({ runtimeId: 'rt-crash-each', classes: { crash: unrulyClass('crash') }, logger });
    const served = await serveHttp1(host);
    try {
      for (let i = 0; i < CALLS; i++) {
        const c = await connect('v2-legacy', served.url, served.fetch, {
          'x-switchyard-class': 'crash',
          'x-switchyard-process': `crash-each-${i}`,
        });
        await assert.rejects((c.raw as Client).callTool({ name: 'echo', arguments: {} }, { timeout: CALL_TIMEOUT_MS }));
        await c.close().catch(() => undefined);
      }
      const died = () => logger.lines.filter((l) => l.obj.event === 'sandbox.died');
      await waitFor('every death to be logged', () => died().length === CALLS);
      assert.deepEqual(
        died().map((l) => l.level),
        ['warn', ...Array<string>(CALLS - 1).fill('debug')],
      );
      // Each, warned of or not, still says how the server ended.
      for (const { obj } of died()) assert.equal(obj.exitCode, 7);
    } finally {
      await served.close();
      await host.close();
    }
  });
});

describe('a server that writes to stderr and exits at once, started once per request', () => {
  // 22 stderr lines a start (see the fixture's `exit`): 10 starts are 220, past the 100 a class may log in 10 s.
  const STARTS = 10;
  const LINES = 22;
  it('gets 100 stderr lines in the log per class and 10 s, not 100 per child, and one count per 10 s of the rest', async () => {
    const clock = new ManualClock();
    const logger = captureLogger();
    const host = testHost({ runtimeId: 'rt-exit-each', classes: { exit: unrulyClass('exit') }, logger, clock });
    const served = await serveHttp1(host);
    const start = (i: number) =>
      assert.rejects(
        connect('v2-legacy', served.url, served.fetch, {
          'x-switchyard-class': 'exit',
          'x-switchyard-process': `exit-${i}`,
        }),
        /could not start/,
      );
    const of = (event: string) => logger.lines.filter((l) => l.obj.event === event && l.level !== 'debug');
    const logged = () => of('sandbox.stderr').length;
    const dropped = () => of('sandbox.stderr_dropped');
    const counted = () => dropped().reduce((n, l) => n + Number(l.obj.dropped), 0);
    try {
      for (let i = 0; i < STARTS; i++) await start(i);
      // A budget per child would log them all (220), with no count.
      await waitFor('the budget to be spent', () => logged() >= 100 && (counted() > 0 || logged() > 100));
      assert.equal(logged(), 100);
      assert.equal(dropped().length, 1, JSON.stringify(dropped()));
      assert.equal(dropped()[0]!.obj.class, 'exit');
      // The next window: the lines held back since are counted in one line, and the next start is logged again.
      await clock.advance(10_000);
      await start(STARTS);
      await waitFor('every line logged or counted', () => logged() + counted() >= (STARTS + 1) * LINES);
      assert.equal(dropped().length, 2, JSON.stringify(dropped()));
      assert.equal(counted(), STARTS * LINES - 100);
      assert.equal(logged(), 100 + LINES);
    } finally {
      await served.close();
      await host.close();
    }
  });
});

describe('a stdio server that stops reading its stdin', () => {
  /** Calls of 1 MiB each: 24 are 24 MiB, past the 16 MiB that may wait on a server's stdin. */
  const CALLS = 24;
  const TEXT = 'x'.repeat(1024 * 1024);
  /** Past any wait of this test, so an accepted call is answered only by the server's end. */
  const LONG_TIMEOUT_MS = 60_000;
  it('has calls past the cap refused at once with a JSON-RPC error, other sandboxes serving; stuck for 60 s, it is stopped', async () => {
    const clock = new ManualClock();
    const logger = captureLogger();
    const reporter = new RecordingReporter();
    const host = testHost({
      runtimeId: 'rt-deaf',
      classes: { deaf: unrulyClass('deaf'), tiny: unrulyClass() },
      clock,
      logger,
      reporter,
      sessionIdleMs: 10 * 60_000,
    });
    const served = await serveHttp1(host);
    const headers = (cls: string, process: string) => ({ 'x-switchyard-class': cls, 'x-switchyard-process': process });
    let c: TestClient | undefined;
    try {
      c = await connect('v2-legacy', served.url, served.fetch, headers('deaf', 'deaf-1'));
      const call = (text: string) =>
        (c!.raw as Client).callTool({ name: 'echo', arguments: { text } }, { timeout: LONG_TIMEOUT_MS });
      const refused: (Error & { code?: unknown })[] = [];
      const calls = [call('stop reading'), ...Array.from({ length: CALLS }, () => call(TEXT))].map((p) =>
        p.then(
          () => assert.fail('a deaf server answered'),
          (e: Error & { code?: unknown }) => (refused.push(e), e),
        ),
      );
      // No more than 17 calls of 1 MiB fit under 16 MiB: the others are refused, at once.
      await waitFor('the calls past the cap to be refused', () => refused.length >= CALLS - 17, CALL_TIMEOUT_MS);
      for (const e of refused) {
        assert.equal(e.code, -32603);
        assert.match(e.message, /the stdio server is not reading its input \(16\.\d MiB wait for it\)/);
      }
      const warned = () => logger.lines.filter((l) => l.obj.event === 'sandbox.stdin_refused');
      assert.equal(warned()[0]?.level, 'warn');
      assert.equal(warned()[0]?.obj.class, 'deaf');
      assert.ok(
        warned()
          .slice(1)
          .every((l) => l.level === 'debug'),
        'one warning per class and 10 s',
      );
      // The runtime and its other sandboxes go on.
      const other = await connect('v2-legacy', served.url, served.fetch, headers('tiny', 'tiny-1'));
      assert.equal(await other.callText('echo', { text: 'still here' }), 'still here');
      await other.close();

      // Stuck as long as an answer may wait for its client: the server is stopped, and its calls in flight answered.
      await clock.advance(60_000);
      const stalled = logger.lines.find((l) => l.obj.event === 'sandbox.stdin_stalled');
      assert.equal(stalled?.level, 'warn');
      for (const e of await Promise.all(calls)) {
        assert.equal(e.code, -32603);
        assert.match(e.message, /closed|not reading its input/i);
      }
      await waitFor('the sandbox to be reported removed', () => !reporter.processes.has('deaf-1'));
      await assert.rejects(c.listToolNames(), /session not found/);
      const again = await connect('v2-legacy', served.url, served.fetch, headers('deaf', 'deaf-1'));
      assert.deepEqual(await again.listToolNames(), ['echo']);
      await again.close();
    } finally {
      // Rejects whatever it still waits for, so a failure here does not wait out LONG_TIMEOUT_MS.
      await c?.close().catch(() => undefined);
      await served.close();
      await host.close();
    }
  });
});
