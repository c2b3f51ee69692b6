import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, loadConfig } from '@switchyard/service';
import { runtimeConfigSchema } from '../src/config.ts';

const load = (env: Record<string, string>) =>
  loadConfig(runtimeConfigSchema, {
    argv: [],
    env: { SWITCHYARD_SCHEDULER_URL: 'http://127.0.0.1:7070', SWITCHYARD_RUNTIME_ID: 'rt-1', ...env },
  });

function refuses(env: Record<string, string>, key: RegExp, why: RegExp): void {
  assert.throws(
    () => load(env),
    (error: unknown) => {
      assert.ok(error instanceof ConfigError, String(error));
      const problems = error.problems.join('\n');
      assert.match(problems, key);
      assert.match(problems, why);
      return true;
    },
    JSON.stringify(env).slice(0, 200),
  );
}

// Every sandbox of an http class sends these headers; fetch refuses a bad one
// when each sandbox starts, so every session of the class would fail (502).
describe('runtime config: headers of an http class', () => {
  const http = (headers: Record<string, string>) =>
    JSON.stringify({ remote: { engine: 'http', url: 'http://127.0.0.1:9/mcp', headers } });

  it('takes header names and values fetch sends', () => {
    const config = load({ SWITCHYARD_CLASSES: http({ 'X-Api-Key': 'k e y', authorization: 'Bearer t' }) });
    assert.deepEqual(config.classes.remote?.headers, { 'X-Api-Key': 'k e y', authorization: 'Bearer t' });
  });

  const refused: { name: string; headers: Record<string, string>; why: RegExp }[] = [
    { name: 'a header name with a space', headers: { 'X Api': 'k' }, why: /HTTP header name/ },
    { name: 'an empty header name', headers: { '': 'k' }, why: /HTTP header name/ },
    { name: 'a header value with a line break', headers: { 'x-api': 'a\nb' }, why: /CR, LF or NUL/ },
  ];
  for (const c of refused) {
    it(`refuses at start ${c.name}`, () =>
      refuses({ SWITCHYARD_CLASSES: http(c.headers) }, /classes\.remote\.headers/, c.why));
  }
});
