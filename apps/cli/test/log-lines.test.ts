// `switchyard up` and `switchyard runtime join` turn pino's JSON lines into
// lines for a person. JSON.parse undoes pino's escaping, so a value holding
// a newline or an escape sequence (an error's message, a refusal's body)
// must be escaped again, or it forges a line or steers the terminal.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { lineOf, parseEntry } from '../src/log-lines.ts';

describe('lineOf', () => {
  it('writes the control characters of a logged value as escapes, on one line', () => {
    const logged = JSON.stringify({ level: 50, msg: 'handler failed', err: 'bad\n  [gateway] ready\x1b[2K\r\u2028' });
    assert.equal(lineOf(parseEntry(logged)), 'handler failed (bad\\u000a  [gateway] ready\\u001b[2K\\u000d\\u2028)');
  });

  it('leaves a plain line as it is', () => {
    assert.equal(
      lineOf({ msg: 'tunnel disconnected', reason: 'GOAWAY (code 0)' }),
      'tunnel disconnected (GOAWAY (code 0))',
    );
  });

  it('shows a logged object by its message: pino writes an error, and a scheduler an unschedulable reason, as one', () => {
    const refused = {
      level: 40,
      msg: 'unschedulable',
      reason: { stage: 'Class', code: 'no_class', message: 'no runtime serves class nope' },
    };
    assert.equal(lineOf(parseEntry(JSON.stringify(refused))), 'unschedulable (no runtime serves class nope)');
    const failed = {
      level: 40,
      msg: 'lease attempt failed',
      err: { type: 'Error', message: 'connect ECONNREFUSED', stack: 'Error: …' },
    };
    assert.equal(lineOf(parseEntry(JSON.stringify(failed))), 'lease attempt failed (connect ECONNREFUSED)');
  });

  it("shows the line a sandbox's server wrote to stderr, which is all such an entry is about, and its class", () => {
    const logged = { level: 30, msg: 'stderr', event: 'sandbox.stderr', class: 'everything', line: 'Server started' };
    assert.equal(lineOf(parseEntry(JSON.stringify(logged))), 'stderr, class everything (Server started)');
  });

  it("shows the last stderr lines of a server that exited, which most often say why, and whose class's it was", () => {
    const died = {
      level: 40,
      msg: 'sandbox died: its server exited with code 1',
      event: 'sandbox.died',
      class: 'my-tools',
      sandbox: 'p1',
      exitCode: 1,
      signal: null,
      stderrTail: ['Traceback (most recent call last):', 'KeyError: MY_API_KEY'],
    };
    assert.equal(
      lineOf(parseEntry(JSON.stringify(died))),
      'sandbox died: its server exited with code 1, class my-tools ' +
        '(its last stderr: Traceback (most recent call last): | KeyError: MY_API_KEY)',
    );
    assert.equal(lineOf({ ...died, stderrTail: [] }), 'sandbox died: its server exited with code 1, class my-tools');
  });

  it("gives a refusal's status with its reason: a scheduler refusing a runtime logs both", () => {
    const refused = {
      level: 40,
      component: 'tunnel',
      msg: 'runtime connect refused',
      remote: '127.0.0.1',
      status: 401,
      error: 'invalid or missing join token',
    };
    assert.equal(
      lineOf(parseEntry(JSON.stringify(refused))),
      'runtime connect refused (HTTP 401: invalid or missing join token)',
    );
    const bad = { ...refused, status: 400, error: 'invalid X-Runtime-Info', field: 'X-Runtime-Info.id' };
    assert.equal(lineOf(bad), 'runtime connect refused (HTTP 400: invalid X-Runtime-Info, field X-Runtime-Info.id)');
  });

  it('writes a logged object without a message as JSON, not as [object Object]', () => {
    assert.equal(lineOf(parseEntry('{"msg":"refused","reason":{"code":"x"}}')), 'refused ({"code":"x"})');
  });
});
