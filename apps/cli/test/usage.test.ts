// Bad usage of the `switchyard` command exits with code 2 and prints on
// stderr what is wrong, the synopsis of the command it was given (of every
// command, given none it knows) and where that command's help is; help
// exits 0 on stdout.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { runCli, synopses } from './support.ts';

/** Every command, in the order a usage text for no command in particular lists them. */
const ALL = ['up', 'status', 'explain', 'runtime join', 'check scheduler', 'check gateway'];

/**
 * `usage`: the commands whose synopsis follows the line saying what is wrong; `help`: what the last line
 * sends the user to for more.
 */
const BAD_USAGE = [
  {
    name: 'no command',
    args: [],
    says: /^switchyard: no command given; switchyard --help lists them$/m,
    usage: ALL,
    help: '<command>',
  },
  { name: 'an unknown command', args: ['launch'], says: /unknown command: launch/, usage: ALL, help: '<command>' },
  // Help asked of a command that does not exist is the same mistake, not a request for the overview.
  {
    name: 'an unknown command with --help',
    args: ['launch', '--help'],
    says: /unknown command: launch/,
    usage: ALL,
    help: '<command>',
  },
  {
    name: 'an unknown command with -h',
    args: ['launch', '--fast', '-h'],
    says: /unknown command: launch/,
    usage: ALL,
    help: '<command>',
  },
  {
    name: 'help for an unknown command',
    args: ['help', 'launch'],
    says: /unknown command: launch/,
    usage: ALL,
    help: '<command>',
  },
  {
    name: 'an unknown runtime subcommand with --help',
    args: ['runtime', 'leave', '--help'],
    says: /unknown runtime command: leave/,
    usage: ['runtime join'],
    help: 'runtime join',
  },
  {
    name: 'an unknown check with --help',
    args: ['check', 'runtime', '--help'],
    says: /unknown check: runtime/,
    usage: ['check scheduler', 'check gateway'],
    help: 'check',
  },
  {
    name: 'check without what to check',
    args: ['check'],
    says: /unknown check: \(none\)/,
    usage: ['check scheduler', 'check gateway'],
    help: 'check',
  },
  {
    name: 'a gateway URL that is not http(s)',
    args: ['check', 'gateway', '--gateway', 'ftp://gateway/mcp'],
    says: /--gateway must be an http\(s\) URL/,
    usage: ['check gateway'],
    help: 'check gateway',
  },
  { name: 'an unknown option', args: ['up', '--turbo'], says: /Unknown option '--turbo'/, usage: ['up'], help: 'up' },
  {
    name: 'a port that is not a number',
    args: ['up', '--gateway-port', 'http'],
    says: /--gateway-port must be a port/,
    usage: ['up'],
    help: 'up',
  },
  {
    name: 'a port out of range',
    args: ['up', '--scheduler-port', '70000'],
    says: /--scheduler-port must be a port/,
    usage: ['up'],
    help: 'up',
  },
  {
    name: 'an unknown log level',
    args: ['up', '--log-level', 'loud'],
    says: /--log-level must be one of/,
    usage: ['up'],
    help: 'up',
  },
  {
    name: 'explain without --process',
    args: ['explain', '--class', 'demo'],
    says: /explain needs --class and --process/,
    usage: ['explain'],
    help: 'explain',
  },
  {
    name: 'a class that is no identity value',
    args: ['explain', '--class', 'demo class', '--process', 'p1'],
    says: /--class must be 1-128 characters from \[A-Za-z0-9\._:@-\], got "demo class"/,
    usage: ['explain'],
    help: 'explain',
  },
  {
    name: 'a process id longer than 128 characters',
    args: ['explain', '--class', 'demo', '--process', 'p'.repeat(129)],
    says: /--process must be 1-128 characters from \[A-Za-z0-9\._:@-\], got "p{129}"/,
    usage: ['explain'],
    help: 'explain',
  },
  {
    name: 'a thread id with a character identities do not take',
    args: ['explain', '--class', 'demo', '--process', 'p1', '--thread', 't/1'],
    says: /--thread must be 1-128 characters from \[A-Za-z0-9\._:@-\], got "t\/1"/,
    usage: ['explain'],
    help: 'explain',
  },
  {
    name: 'an unknown runtime subcommand',
    args: ['runtime', 'leave'],
    says: /unknown runtime command: leave/,
    usage: ['runtime join'],
    help: 'runtime join',
  },
  {
    name: 'runtime join without a token',
    args: ['runtime', 'join', 'http://x'],
    says: /needs <scheduler-url> and --token/,
    usage: ['runtime join'],
    help: 'runtime join',
  },
  {
    name: 'a scheduler URL without a scheme',
    args: ['status', '--scheduler', '127.0.0.1:7070'],
    says: /--scheduler must be an http\(s\) URL such as http:\/\/127\.0\.0\.1:7070, got 127\.0\.0\.1:7070/,
    usage: ['status'],
    help: 'status',
  },
  {
    name: 'a runtime join URL without a scheme',
    args: ['runtime', 'join', 'localhost:7070', '--token', 't'],
    says: /<scheduler-url> must be an http\(s\) URL/,
    usage: ['runtime join'],
    help: 'runtime join',
  },
  {
    name: 'a class runtime join cannot serve',
    args: ['runtime', 'join', 'http://x', '--token', 't', '--class', 'demo', '--class', 'gpu'],
    says: /unknown class gpu: runtime join serves demo, everything/,
    usage: ['runtime join'],
    help: 'runtime join',
  },
  {
    name: 'an empty runtime id',
    args: ['runtime', 'join', 'http://x', '--token', 't', '--id', ''],
    says: /^switchyard: --id must be 1-128 characters from \[A-Za-z0-9\._:@-\], got ""$/m,
    usage: ['runtime join'],
    help: 'runtime join',
  },
  {
    name: 'a runtime id longer than 128 characters',
    args: ['runtime', 'join', 'http://x', '--token', 't', '--id', 'r'.repeat(129)],
    says: /--id must be 1-128 characters from \[A-Za-z0-9\._:@-\], got "r{129}"/,
    usage: ['runtime join'],
    help: 'runtime join',
  },
  {
    name: 'a sandbox count that is not a number',
    args: ['runtime', 'join', 'http://x', '--token', 't', '--sandboxes', 'abc'],
    says: /--sandboxes must be a positive integer, got abc/,
    usage: ['runtime join'],
    help: 'runtime join',
  },
  {
    name: 'an option without its value',
    args: ['explain', '--class', 'demo', '--process', 'p1', '--thread'],
    says: /--thread/,
    usage: ['explain'],
    help: 'explain',
  },
  { name: 'a value given to a flag', args: ['up', '--processes=yes'], says: /--processes/, usage: ['up'], help: 'up' },
];

// Each case is its own short-lived process; running them side by side keeps the suite fast.
describe('switchyard usage', { concurrency: true }, () => {
  for (const c of BAD_USAGE) {
    it(`exits 2 with what is wrong and the synopsis of ${c.usage.join(', ')} for ${c.name}`, async () => {
      const { code, stdout, stderr } = await runCli(c.args);
      assert.equal(code, 2);
      const lines = stderr.trimEnd().split('\n');
      assert.match(lines[0]!, /^switchyard: /);
      assert.match(stderr, c.says);
      assert.deepEqual(synopses(stderr), c.usage);
      assert.equal(
        lines.at(-1),
        `switchyard ${c.help} --help ${c.help === '<command>' ? 'describes one command' : 'describes each flag'}.`,
      );
      assert.equal(
        lines.length,
        c.usage.length + 3,
        `the error, usage:, the synopses and the pointer only:\n${stderr}`,
      );
      assert.equal(stdout, '');
    });
  }

  it("prints the one command's synopsis under the error, not the overview of every command", async () => {
    const { code, stderr } = await runCli(['up', '--gateway-port', 'http']);
    assert.equal(code, 2);
    assert.equal(
      stderr,
      'switchyard: --gateway-port must be a port number, got http\n' +
        'usage:\n' +
        '  switchyard up [--processes] [--gateway-port 8080] [--scheduler-port 7070] [--log-level warn]\n' +
        'switchyard up --help describes each flag.\n',
    );
  });

  // A command's own help is usage-help.test.ts's.
  for (const args of [['--help'], ['-h']]) {
    it(`prints the usage on stdout and exits 0 for ${args.join(' ')}`, async () => {
      const { code, stdout } = await runCli(args);
      assert.equal(code, 0);
      assert.match(stdout, /switchyard explain --class <class> --process <id>/);
    });
  }

  it('says where a scheduler comes from, exit 1, when nothing listens at the URL', async () => {
    // Port 1 (tcpmux): nothing listens there, where a port just freed may be taken again at once.
    const url = 'http://127.0.0.1:1';
    const { code, stdout, stderr } = await runCli(['status', '--scheduler', url]);
    assert.equal(code, 1);
    assert.equal(stdout, '');
    assert.match(
      stderr,
      /cannot reach http:\/\/127\.0\.0\.1:\d+: .*ECONNREFUSED.* \(nothing listens there: start a cluster with npm start, or pass --scheduler <url>\)/,
    );
  });

  it('says so, exit 1, when the scheduler URL is not a scheduler', async () => {
    const other = createServer((_req, res) =>
      res.writeHead(404, { 'content-type': 'text/html' }).end('<!DOCTYPE html>'),
    );
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
    try {
      for (const args of [['status'], ['explain', '--class', 'demo', '--process', 'p1']]) {
        const { code, stderr } = await runCli([...args, '--scheduler', url]);
        assert.equal(code, 1);
        assert.match(
          stderr,
          /does not answer as a Switchyard scheduler \(HTTP 404 to \/api\/(epoch|runtimes|schedule)\)/,
        );
      }
    } finally {
      other.close();
    }
  });
});
