import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { redisTlsOptions, redisUrlProblem } from '@switchyard/service';

describe('redisTlsOptions', () => {
  const cases: { url: string; options: { tls?: { servername: string } } }[] = [
    { url: 'rediss://redis.example:6380', options: { tls: { servername: 'redis.example' } } },
    { url: 'rediss://:p%23ss@cache.internal/2', options: { tls: { servername: 'cache.internal' } } },
    { url: 'rediss://10.0.0.5:6380', options: {} },
    { url: 'rediss://[fd00::5]:6380', options: {} },
    { url: 'redis://redis.example:6379', options: {} },
  ];
  for (const c of cases) {
    it(`gives ${JSON.stringify(c.options)} for ${c.url}: SNI names a host over TLS, never an address`, () => {
      assert.equal(redisUrlProblem(c.url), undefined);
      assert.deepEqual(redisTlsOptions(c.url), c.options);
    });
  }
});
