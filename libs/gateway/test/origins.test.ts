import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SwitchyardError } from '@switchyard/protocol';
import { createGateway } from '@switchyard/gateway';
import { OriginPolicy } from '../src/origins.ts';
import { INITIALIZE, post, startHarness } from './harness.ts';

describe('allowed origins', () => {
  const policy = new OriginPolicy([
    'https://app.example',
    'http://localhost:*',
    'http://127.0.0.1:*',
    'http://[::1]:*',
    'null',
  ]);
  const cases: [string, boolean][] = [
    ['https://app.example', true],
    ['https://app.example:8443', false],
    ['http://app.example', false],
    ['http://localhost:6274', true],
    ['http://localhost', true],
    ['https://localhost:6274', false],
    ['http://localhost.evil.example:6274', false],
    ['http://evil.example/http://localhost:1', false],
    ['http://127.0.0.1:5173', true],
    ['http://127.0.0.2:5173', false],
    ['http://[::1]:3000', true],
    ['http://[::2]:3000', false],
    ['null', true],
    ['', false],
  ];
  for (const [origin, allowed] of cases) {
    it(`${allowed ? 'allows' : 'refuses'} Origin ${JSON.stringify(origin)}`, () => {
      assert.equal(policy.allows(origin), allowed);
    });
  }

  it('allows no Origin at all when it lists none', () => {
    assert.equal(new OriginPolicy([]).allows('http://localhost:1'), false);
  });

  const invalid = [
    'https://app.example/',
    'https://App.example',
    'app.example',
    'http://localhost:*:1',
    'ftp://x',
    '*',
  ];
  for (const entry of invalid) {
    it(`refuses ${JSON.stringify(entry)} as an entry at start, naming it`, () => {
      assert.throws(
        () => createGateway({ schedulers: ['http://127.0.0.1:1'], allowedOrigins: [entry] }),
        (error: unknown) => error instanceof SwitchyardError && error.message.includes(JSON.stringify(entry)),
      );
    });
  }

  // A browser writes an IPv6 host compressed (RFC 5952) and leaves out a default port: an entry in another form
  // would pass every check above and then answer each of its browsers 403. Said at start, with the form to write.
  const unsent: [string, string][] = [
    ['http://[0:0:0:0:0:0:0:1]:3000', 'http://[::1]:3000'],
    ['http://[::ffff:127.0.0.1]:*', 'http://[::ffff:7f00:1]:*'],
    ['http://[fd00:0::7]', 'http://[fd00::7]'],
    ['http://[::1]:80', 'http://[::1]'],
    ['https://app.example:443', 'https://app.example'],
  ];
  for (const [entry, sent] of unsent) {
    it(`refuses ${entry}, which no browser sends, naming ${sent}`, () => {
      assert.throws(
        () => createGateway({ schedulers: ['http://127.0.0.1:1'], allowedOrigins: [entry] }),
        (error: unknown) =>
          error instanceof SwitchyardError &&
          error.message.includes(JSON.stringify(entry)) &&
          error.message.includes(sent),
      );
      assert.equal(new OriginPolicy([sent]).allows(sent.replace(':*', ':3000')), true);
    });
  }

  it('answers an Origin outside a wildcard host 403 and one inside it normally, end to end', async () => {
    const h = await startHarness(1, { allowedOrigins: ['http://localhost:*'] });
    try {
      const inside = await post(h.url, INITIALIZE, { origin: 'http://localhost:6274' });
      assert.equal(inside.status, 200);
      const outside = await post(h.url, INITIALIZE, { origin: 'http://localhost.evil.example:6274' });
      assert.equal(outside.status, 403);
      assert.equal((outside.json as { error: { code: number } }).error.code, -32000);
    } finally {
      await h.close();
    }
  });
});
