// `switchyard runtime join` and a scheduler it cannot reach: before its first
// tunnel it says so, that it dials again and for how long, and gives up
// after --wait-seconds (exit 1) naming what to check; once joined, a
// scheduler that goes away is dialled again until Ctrl-C (exit 0: it served;
// before the join, 130). 127.0.0.1:1 is the address where nothing listens.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { dialFailure } from '../src/join-wait.ts';
import { killGroup, runCli, spawnCli, startOneReplica, until } from './support.ts';

const JOIN_TOKEN = 'join-token-0123456789abcdef';
const NOWHERE = 'http://127.0.0.1:1';

describe('switchyard runtime join, a scheduler it cannot reach', () => {
  it('gives up at the first failed dial with --wait-seconds 0, saying what to check, and exits 1', async () => {
    const { code, stderr } = await runCli(['runtime', 'join', NOWHERE, '--token', JOIN_TOKEN, '--wait-seconds', '0']);
    assert.equal(code, 1, stderr);
    assert.match(
      stderr,
      /^switchyard: gave up dialling http:\/\/127\.0\.0\.1:1 after 0 s: connect ECONNREFUSED 127\.0\.0\.1:1 \(nothing listens there\); check <scheduler-url>, or wait longer with --wait-seconds$/m,
    );
    assert.doesNotMatch(stderr, /^\s+at /m, 'no stack trace');
  });

  it('says it dials again, and for how long, then gives up', async () => {
    const { code, stderr } = await runCli(['runtime', 'join', NOWHERE, '--token', JOIN_TOKEN, '--wait-seconds', '1']);
    assert.equal(code, 1, stderr);
    const lines = stderr.trimEnd().split('\n');
    assert.equal(lines.length, 3, stderr);
    assert.match(lines[0]!, /^switchyard: runtime \S+ dialling http:\/\/127\.0\.0\.1:1 \(Ctrl-C to stop\)$/);
    assert.match(
      lines[1]!,
      /^switchyard: cannot reach http:\/\/127\.0\.0\.1:1: connect ECONNREFUSED 127\.0\.0\.1:1 \(nothing listens there\); dialling again for up to 1 s \(--wait-seconds\)$/,
    );
    assert.match(lines[2]!, /^switchyard: gave up dialling http:\/\/127\.0\.0\.1:1 after 1 s: connect ECONNREFUSED/);
  });

  it('says to use http:// when https:// reaches a scheduler serving plain HTTP', async () => {
    const replica = await startOneReplica({ joinTokens: () => [JOIN_TOKEN] });
    try {
      const url = replica.url.replace(/^http:/, 'https:');
      const { code, stderr } = await runCli(['runtime', 'join', url, '--token', JOIN_TOKEN, '--wait-seconds', '0']);
      assert.equal(code, 1, stderr);
      assert.match(
        stderr,
        /^switchyard: gave up dialling https:\/\/127\.0\.0\.1:\d+ after 0 s: TLS handshake failed: the server there answers plain HTTP \(use http:\/\/\); check <scheduler-url>/m,
      );
    } finally {
      await replica.close();
    }
  });

  it('refuses a --wait-seconds that is no number of seconds as bad usage', async () => {
    const { code, stderr } = await runCli([
      'runtime',
      'join',
      NOWHERE,
      '--token',
      JOIN_TOKEN,
      '--wait-seconds',
      '3601',
    ]);
    assert.equal(code, 2, stderr);
    assert.match(stderr, /^switchyard: --wait-seconds must be 0 to 3600 seconds, got 3601$/m);
  });

  // A runtime that never joined did not do what it was run for; once joined, 0 (the test below).
  for (const [signal, exitCode] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const) {
    it(`exits ${exitCode} at ${signal} before it has joined, as a shell reports a command interrupted`, async () => {
      const args = ['runtime', 'join', NOWHERE, '--token', JOIN_TOKEN, '--id', 'rt-0', '--wait-seconds', '600'];
      const run = spawnCli(args);
      try {
        await until('the first failed dial said', () => / cannot reach /.test(run.stderr()));
        run.child.kill(signal);
        const { code } = await run.exited;
        assert.equal(code, exitCode, run.stderr());
        assert.match(run.stderr(), /^switchyard: runtime rt-0 stopped before it joined$/m);
        assert.doesNotMatch(run.stderr(), /gave up/);
      } finally {
        killGroup(run.child);
      }
    });
  }

  it('once joined, dials a scheduler that went away again until Ctrl-C, saying so', async () => {
    const replica = await startOneReplica({ joinTokens: () => [JOIN_TOKEN] });
    const run = spawnCli([
      'runtime',
      'join',
      replica.url,
      '--token',
      JOIN_TOKEN,
      '--id',
      'rt-0',
      '--wait-seconds',
      '0',
    ]);
    try {
      await until('the joined line', () => /^switchyard: runtime rt-0 joined /m.test(run.stderr()));
      await replica.close();
      await until('the line saying it dials again', () =>
        /^switchyard: cannot reach http:\/\/127\.0\.0\.1:\d+: .*; dialling again \(Ctrl-C to stop\)$/m.test(
          run.stderr(),
        ),
      );
      assert.equal(run.child.exitCode, null, run.stderr());
      run.child.kill('SIGINT');
      const { code } = await run.exited;
      assert.equal(code, 0, run.stderr());
      assert.doesNotMatch(run.stderr(), /gave up/);
    } finally {
      killGroup(run.child);
      await replica.close();
    }
  });
});

describe('dialFailure', () => {
  const CASES = [
    {
      reason: 'connect ECONNREFUSED 10.0.0.7:7070',
      says: 'connect ECONNREFUSED 10.0.0.7:7070 (nothing listens there)',
    },
    { reason: 'getaddrinfo ENOTFOUND schedulr', says: 'getaddrinfo ENOTFOUND schedulr (no such host)' },
    {
      reason: 'websocket error: write EPROTO 40AD:error:0A00010B:SSL routines::wrong version number:../deps/x.c:77:\n',
      says: 'TLS handshake failed: the server there answers plain HTTP (use http://)',
    },
    {
      reason: 'no answer to the connect request within 10000 ms',
      says: 'no answer to the connect request within 10000 ms',
    },
    { reason: undefined, says: 'no reason given' },
  ];
  for (const { reason, says } of CASES) {
    it(`says ${JSON.stringify(says)} for ${JSON.stringify(reason)}`, () => assert.equal(dialFailure(reason), says));
  }
});
