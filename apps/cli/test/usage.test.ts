// Bad usage of the `switchyard` command exits with code 2 and prints the
// usage text on stderr, whatever the mistake; help exits 0 on stdout.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { runCli } from './support.ts';

const BAD_USAGE = [
  { name: 'an unknown command', args: ['launch'], says: /unknown command: launch/ },
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
  { name: 'an unknown runtime subcommand', args: ['runtime', 'leave'], says: /unknown runtime command: leave/ },
  {
    name: 'runtime join without a token',
    args: ['runtime', 'join', 'http://x'],
    says: /needs <scheduler-url> and --token/,
  },
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

  it('prints the usage on stdout and exits 0 for --help', async () => {
    const { code, stdout } = await runCli(['--help']);
    assert.equal(code, 0);
    assert.match(stdout, /switchyard explain --class <class> --process <id>/);
  });
});
