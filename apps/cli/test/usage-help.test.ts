// `switchyard <command> --help` prints that command's own help (its synopsis,
// its flags and an example) on stdout and exits 0; `switchyard --help` prints
// the overview of every command.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { identityValueSchema } from '@switchyard/protocol';
import { runCli, synopses } from './support.ts';

const COMMANDS = [
  { args: ['up', '--help'], command: 'up', flag: '--processes', example: 'switchyard up --gateway-port 0' },
  { args: ['status', '-h'], command: 'status', flag: '--token-file <file>', example: 'switchyard status --scheduler' },
  {
    args: ['explain', '--help'],
    command: 'explain',
    flag: '--thread <id>',
    example: 'switchyard explain --class demo',
  },
  {
    args: ['runtime', 'join', '--help'],
    command: 'runtime join',
    flag: '--sandboxes <n>',
    example: 'switchyard runtime join http://127.0.0.1:7070 --token-file',
  },
  {
    args: ['check', 'scheduler', '--help'],
    command: 'check scheduler',
    flag: '--replica <url>',
    example: 'switchyard check scheduler --scheduler',
  },
  {
    args: ['check', 'gateway', '--scheduler', 'x', '-h'],
    command: 'check gateway',
    flag: '--auth-required',
    example: 'switchyard check gateway --gateway',
  },
];

describe('switchyard help', { concurrency: true }, () => {
  for (const c of COMMANDS) {
    it(`prints the help of ${c.command} alone, with its flags and an example, for ${c.args.join(' ')}`, async () => {
      const { code, stdout, stderr } = await runCli(c.args);
      assert.equal(code, 0, stderr);
      assert.match(stdout, new RegExp(`^usage:\\n {2}switchyard ${c.command} `));
      assert.ok(stdout.includes(`\n  ${c.flag} `), stdout);
      assert.ok(stdout.includes(`example:\n  ${c.example}`), stdout);
      assert.deepEqual(synopses(stdout), [c.command]);
    });
  }

  it('prints both checks for check --help, and runtime join for runtime --help', async () => {
    const check = await runCli(['check', '--help']);
    assert.equal(check.code, 0);
    assert.deepEqual(synopses(check.stdout), ['check scheduler', 'check gateway']);
    const help = await runCli(['help', 'check', 'gateway', '-h']);
    assert.equal(help.code, 0);
    assert.deepEqual(synopses(help.stdout), ['check gateway']);
    const runtime = await runCli(['runtime', '-h']);
    assert.equal(runtime.code, 0);
    assert.match(runtime.stdout, /^usage:\n {2}switchyard runtime join </);
  });

  it('describes --config in runtime join --help and lists it in its synopsis, beside --class', async () => {
    const help = await runCli(['runtime', 'join', '--help']);
    assert.equal(help.code, 0, help.stderr);
    assert.match(help.stdout, /^ {2}switchyard runtime join .*\[--class demo\|everything\]\.\.\. \[--config <file>\]/m);
    const flag = /\n {2}--config <file> +([^]*?)\n {2}--/.exec(help.stdout)?.[1]?.replace(/\s+/g, ' ');
    assert.match(flag ?? '', /classes of a runtime config file/, help.stdout);
  });

  it('states the rule --id must follow in runtime join --help, as the refusal of a bad --id does', async () => {
    const refused = await runCli(['runtime', 'join', 'http://x', '--token', 't', '--id', 'a/b']);
    assert.equal(refused.code, 2, refused.stderr);
    const rule = /--id must be (.+), got "a\/b"/.exec(refused.stderr)?.[1];
    assert.ok(rule, refused.stderr);
    // The scheduler's own rule, so neither says another.
    assert.equal(`must be ${rule}`, identityValueSchema.safeParse('a/b').error?.issues[0]?.message);
    const help = await runCli(['runtime', 'join', '--help']);
    const idFlag = /\n {2}--id <id> +([^]*?)\n {2}--/.exec(help.stdout)?.[1]?.replace(/\s+/g, ' ');
    assert.ok(idFlag?.includes(rule), `--id's help: ${idFlag}`);
  });

  it('states the rule --class, --process and --thread must follow in explain --help, as their refusals do', async () => {
    const help = await runCli(['explain', '--help']);
    assert.equal(help.code, 0, help.stderr);
    for (const flag of ['class', 'process', 'thread']) {
      const args = ['explain', '--class', 'demo', '--process', 'p', '--thread', 't', `--${flag}`, 'a/b'];
      const refused = await runCli(args);
      assert.equal(refused.code, 2, refused.stderr);
      const rule = new RegExp(`--${flag} must be (.+), got "a/b"`).exec(refused.stderr)?.[1];
      assert.ok(rule, refused.stderr);
      const flags = /\n {2}--class <class>[^]*?\n(?= {2}--scheduler)/.exec(help.stdout)?.[0]?.replace(/\s+/g, ' ');
      assert.ok(flags?.includes(rule), `explain's identity flags: ${flags}`);
    }
  });

  for (const args of [['--help'], ['-h'], ['help'], ['help', '--help']]) {
    it(`prints the overview of every command for ${args.join(' ')}, and how to get one's own`, async () => {
      const { code, stdout } = await runCli(args);
      assert.equal(code, 0);
      assert.deepEqual(synopses(stdout), [
        'up',
        'status',
        'explain',
        'runtime join',
        'check scheduler',
        'check gateway',
      ]);
      assert.match(stdout, /switchyard <command> --help describes one command/);
    });
  }
});
