// `switchyard runtime join` takes its join token from --token, --token-file
// or SWITCHYARD_JOIN_TOKEN: on a command line every local user sees it in
// `ps`, and it lands in shell history. A replica in this process, the
// command as a child.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { killGroup, runCli, spawnCli, startOneReplica, until, type Running } from './support.ts';

const JOIN_TOKEN = 'join-token-0123456789abcdef';

/** Runs `runtime join` until it has joined, then stops it as Ctrl-C would; its exit code and output. */
async function joinThenStop(args: readonly string[], env: Record<string, string> = {}) {
  const run: Running = spawnCli(['runtime', 'join', ...args], env);
  try {
    await until('the joined line', () => {
      if (run.child.exitCode !== null) throw new Error(`runtime join exited early:\n${run.stderr()}`);
      return /^switchyard: runtime \S+ joined /m.test(run.stderr());
    });
    run.child.kill('SIGINT');
    const { code } = await run.exited;
    return { code, stderr: run.stderr() };
  } finally {
    killGroup(run.child);
  }
}

describe('switchyard runtime join, its token from a file or the environment', () => {
  let replica: SchedulerReplica;
  let dir: string;
  before(async () => {
    replica = await startOneReplica({ joinTokens: () => [JOIN_TOKEN] });
    dir = mkdtempSync(join(tmpdir(), 'switchyard-join-token-'));
  });
  after(async () => {
    await replica?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('joins with the first token of --token-file, past comments and blank lines', async () => {
    const file = join(dir, 'join-token');
    writeFileSync(file, `# the cluster's join token\n\n\uFEFF${JOIN_TOKEN}\r\nanother-token-0123456789abcdef\n`);
    const { code, stderr } = await joinThenStop([replica.url, '--token-file', file, '--id', 'rt-file']);
    assert.equal(code, 0, stderr);
    assert.match(stderr, /^switchyard: runtime rt-file stopped$/m);
  });

  it('joins with SWITCHYARD_JOIN_TOKEN, and the flags win over it', async () => {
    const env = await joinThenStop([replica.url, '--id', 'rt-env'], { SWITCHYARD_JOIN_TOKEN: JOIN_TOKEN });
    assert.equal(env.code, 0, env.stderr);
    const flag = await joinThenStop([replica.url, '--token', JOIN_TOKEN, '--id', 'rt-flag'], {
      SWITCHYARD_JOIN_TOKEN: 'wrong-token-0123456789abcdef',
    });
    assert.equal(flag.code, 0, flag.stderr);
  });

  it('names where the refused token came from, and exits 1', async () => {
    const file = join(dir, 'wrong-token');
    writeFileSync(file, 'wrong-token-0123456789abcdef\n');
    const fromFile = await runCli(['runtime', 'join', replica.url, '--token-file', file, '--id', 'rt-x']);
    assert.equal(fromFile.code, 1, fromFile.stderr);
    assert.match(fromFile.stderr, /refused the join token \(check --token-file .*wrong-token\)$/m);
    const fromEnv = await runCli(['runtime', 'join', replica.url, '--id', 'rt-x'], 15_000, {
      SWITCHYARD_JOIN_TOKEN: 'wrong-token-0123456789abcdef',
    });
    assert.equal(fromEnv.code, 1, fromEnv.stderr);
    assert.match(fromEnv.stderr, /refused the join token \(check SWITCHYARD_JOIN_TOKEN\)$/m);
  });

  it('refuses --token with --token-file as bad usage', async () => {
    const file = join(dir, 'both');
    writeFileSync(file, `${JOIN_TOKEN}\n`);
    const { code, stdout, stderr } = await runCli([
      'runtime',
      'join',
      replica.url,
      '--token',
      't',
      '--token-file',
      file,
    ]);
    assert.equal(code, 2, stderr);
    assert.equal(stdout, '');
    assert.match(stderr, /^switchyard: give --token or --token-file, not both$/m);
  });

  it('holds a token from a file or the environment to the checks --token gets, naming where it came from', async () => {
    const file = join(dir, 'nbsp');
    writeFileSync(file, 'join-token\u00a0secret-part\n');
    const fromFile = await runCli(['runtime', 'join', replica.url, '--token-file', file]);
    assert.equal(fromFile.code, 2, fromFile.stderr);
    assert.match(
      fromFile.stderr,
      /^switchyard: --token-file .*nbsp holds a character a token cannot have, at position 11/,
    );
    assert.doesNotMatch(fromFile.stderr, /secret-part/);
    const fromEnv = await runCli(['runtime', 'join', replica.url], 15_000, {
      SWITCHYARD_JOIN_TOKEN: 'join\rsecret-part',
    });
    assert.equal(fromEnv.code, 2, fromEnv.stderr);
    assert.match(
      fromEnv.stderr,
      /^switchyard: SWITCHYARD_JOIN_TOKEN holds a character a token cannot have, at position 5/,
    );
    assert.doesNotMatch(fromEnv.stderr, /secret-part/);
  });

  it('says whether a token file is missing, unreadable or empty, for runtime join as for status', async () => {
    const empty = join(dir, 'empty');
    writeFileSync(empty, '# the join token goes here\n\n');
    const cases = [
      { file: join(dir, 'missing'), says: /--token-file \S+missing cannot be read \(no such file\)$/m },
      { file: dir, says: /--token-file \S+ cannot be read \(a directory, not a file\)$/m },
      { file: empty, says: /--token-file \S+empty holds no token \(only blank lines and # comments\)$/m },
    ];
    for (const { file, says } of cases) {
      for (const args of [
        ['runtime', 'join', replica.url, '--token-file', file],
        ['status', '--scheduler', replica.url, '--token-file', file],
      ]) {
        const { code, stdout, stderr } = await runCli(args);
        assert.equal(code, 2, stderr);
        assert.equal(stdout, '');
        assert.match(stderr.split('\n')[0]!, says);
      }
    }
  });

  it('says where a join token comes from when none is given', async () => {
    const { code, stderr } = await runCli(['runtime', 'join', replica.url], 15_000, { SWITCHYARD_JOIN_TOKEN: '' });
    assert.equal(code, 2, stderr);
    assert.match(
      stderr,
      /^switchyard: runtime join needs <scheduler-url> and --token, --token-file or SWITCHYARD_JOIN_TOKEN$/m,
    );
  });
});
