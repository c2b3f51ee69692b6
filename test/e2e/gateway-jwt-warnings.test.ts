// A gateway in auth mode `jwt` says at start what its settings let through:
// without auth.issuer, tokens of any issuer the JWKS signs for (one key set
// serves every tenant of a multi-tenant provider); without auth.audience or
// auth.resource, tokens for any audience; with a plain-http JWKS URL off
// this host, tokens anyone on the path can sign. Gateways as processes; their
// JWKS and scheduler are never reached. The warnings are all logged by the
// ready line, so each gateway stops without a drain delay (5 s by default).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnApp } from '../support/processes.ts';

const JWT = ['--auth.mode', 'jwt', '--auth.jwks-url', 'http://127.0.0.1:1/jwks.json'];

/** The warnings (level 40) a gateway with `args` logs up to its ready line. */
async function warningsAtStart(name: string, args: readonly string[]): Promise<string[]> {
  const gateway = await spawnApp('gateway', name, [
    ...['--host', '127.0.0.1', '--port', '0', '--schedulers', 'http://127.0.0.1:1', '--drain-delay-ms', '0'],
    ...JWT,
    ...args,
  ]);
  try {
    return gateway.logs.filter((l) => l.level === 40).map((l) => String(l.msg));
  } finally {
    await gateway.stop();
  }
}

describe('a gateway in auth mode jwt, at start', () => {
  it('warns that without auth.issuer it takes tokens of any issuer', async () => {
    const warnings = await warningsAtStart('gw-jwt-no-issuer', ['--auth.audience', 'switchyard']);
    assert.equal(warnings.filter((w) => /auth\.issuer/.test(w)).length, 1, JSON.stringify(warnings));
    assert.equal(warnings.filter((w) => /any audience/.test(w)).length, 0, JSON.stringify(warnings));
  });

  it('warns that without auth.audience or auth.resource it takes tokens for any audience', async () => {
    const warnings = await warningsAtStart('gw-jwt-no-audience', ['--auth.issuer', 'https://issuer.test']);
    assert.equal(warnings.filter((w) => /any audience/.test(w)).length, 1, JSON.stringify(warnings));
    assert.equal(warnings.filter((w) => /auth\.issuer/.test(w)).length, 0, JSON.stringify(warnings));
  });

  it('warns of a plain-http JWKS URL off this host, not of one on loopback or https', async () => {
    const plainHttp = /auth\.jwksUrl is plain http/;
    const settled = ['--auth.issuer', 'https://issuer.test', '--auth.audience', 'switchyard'];
    const remote = await warningsAtStart('gw-jwt-http-jwks', [
      ...settled,
      ...['--auth.jwks-url', 'http://keys.example.test/jwks.json'],
    ]);
    assert.equal(remote.filter((w) => plainHttp.test(w)).length, 1, JSON.stringify(remote));
    const urls = ['http://127.0.0.1:1/jwks.json', 'http://[::1]:1/jwks.json', 'https://keys.example.test/jwks.json'];
    // Independent gateways: they start side by side.
    const quiet = await Promise.all(
      urls.map((url) => warningsAtStart('gw-jwt-jwks-ok', [...settled, '--auth.jwks-url', url])),
    );
    urls.forEach((url, i) => {
      assert.deepEqual(
        quiet[i]!.filter((w) => plainHttp.test(w)),
        [],
        url,
      );
    });
  });

  it('warns of neither with both set', async () => {
    const args = ['--auth.issuer', 'https://issuer.test', '--auth.audience', 'switchyard'];
    const warnings = await warningsAtStart('gw-jwt-both', args);
    assert.deepEqual(
      warnings.filter((w) => /auth\.issuer|any audience/.test(w)),
      [],
    );
  });
});
