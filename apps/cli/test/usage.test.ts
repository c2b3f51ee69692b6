// Bad usage of the `switchyard` command exits with code 2 and prints the
// usage text on stderr, whatever the mistake; help exits 0 on stdout.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { runCli } from './support.ts';

const BAD_USAGE = [
  { name: 'no command', args: [], says: /^switchyard: no command given; switchyard --help lists them$/m },
  { name: 'an unknown command', args: ['launch'], says: /unknown command: launch/ },
  // Help asked of a command that does not exist is the same mistake, not a request for the overview.
  { name: 'an unknown command with --help', args: ['launch', '--help'], says: /unknown command: launch/ },
  { name: 'an unknown command with -h', args: ['launch', '--fast', '-h'], says: /unknown command: launch/ },
  { name: 'help for an unknown command', args: ['help', 'launch'], says: /unknown command: launch/ },
  {
    name: 'an unknown runtime subcommand with --help',
    args: ['runtime', 'leave', '--help'],
    says: /unknown runtime command: leave/,
  },
  { name: 'an unknown check with --help', args: ['check', 'runtime', '--help'], says: /unknown check: runtime/ },
  { name: 'an unknown option', args: ['up', '--turbo'], says: /Unknown option '--turbo'/ },
  {
    name: 'a port that is not a number',
    args: ['up', '--gateway-port', 'http'],
    says: /--gateway-port must be a port/,
  },
  { name: 'a port out of range', args: ['up', '--scheduler-port', '70000'], says: /--scheduler-port must be a port/ },
  { name: 'an unknown log level', args: ['up', '--log-level', 'loud'], says: /--log-level must be one of/ },
  {
    name: 'explain without --process',
    args: ['explain', '--class', 'demo'],
    says: /explain needs --class and --process/,
  },
  {
    name: 'a class that is no identity value',
    args: ['explain', '--class', 'demo class', '--process', 'p1'],
    says: /--class must be 1-128 characters from \[A-Za-z0-9\._:@-\], got "demo class"/,
  },
  {
    name: 'a process id longer than 128 characters',
    args: ['explain', '--class', 'demo', '--process', 'p'.repeat(129)],
    says: /--process must be 1-128 characters from \[A-Za-z0-9\._:@-\], got "p{129}"/,
  },
  {
    name: 'a thread id with a character identities do not take',
    args: ['explain', '--class', 'demo', '--process', 'p1', '--thread', 't/1'],
    says: /--thread must be 1-128 characters from \[A-Za-z0-9\._:@-\], got "t\/1"/,
  },
  { name: 'an unknown runtime subcommand', args: ['runtime', 'leave'], says: /unknown runtime command: leave/ },
  {
    name: 'runtime join without a token',
    args: ['runtime', 'join', 'http://x'],
    says: /needs <scheduler-url> and --token/,
  },
  {
    name: 'a scheduler URL without a scheme',
    args: ['status', '--scheduler', '127.0.0.1:7070'],
    says: /--scheduler must be an http\(s\) URL such as http:\/\/127\.0\.0\.1:7070, got 127\.0\.0\.1:7070/,
  },
  {
    name: 'a runtime join URL without a scheme',
    args: ['runtime', 'join', 'localhost:7070', '--token', 't'],
    says: /<scheduler-url> must be an http\(s\) URL/,
  },
  {
    name: 'a class runtime join cannot serve',
    args: ['runtime', 'join', 'http://x', '--token', 't', '--class', 'demo', '--class', 'gpu'],
    says: /unknown class gpu: runtime join serves demo, everything/,
  },
  {
    name: 'a sandbox count that is not a number',
    args: ['runtime', 'join', 'http://x', '--token', 't', '--sandboxes', 'abc'],
    says: /--sandboxes must be a positive integer, got abc/,
  },
  {
    name: 'an option without its value',
    args: ['explain', '--class', 'demo', '--process', 'p1', '--thread'],
    says: /--thread/,
  },
  { name: 'a value given to a flag', args: ['up', '--processes=yes'], says: /--processes/ },
];

// Each case is its own short-lived process; running them side by side keeps the suite fast.
describe('switchyard usage', { concurrency: true }, () => {
  for (const c of BAD_USAGE) {
    it(`exits 2 with the usage text for ${c.name}`, async () => {
      const { code, stdout, stderr } = await runCli(c.args);
      assert.equal(code, 2);
      assert.match(stderr, c.says);
      assert.match(stderr, /^usage:\n {2}switchyard up /m);
      assert.equal(stdout, '');
    });
  }

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
