import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { LOG_CENSOR, createLogger } from '@switchyard/service';

function capture(redact?: string[]) {
  const lines: string[] = [];
  const logger = createLogger({
    name: 'test',
    level: 'debug',
    redact,
    destination: { write: (s: string) => void lines.push(s) },
  });
  return { logger, lines, last: () => JSON.parse(lines.at(-1)!) as Record<string, unknown> };
}

describe('createLogger redaction', () => {
  const cases: { name: string; obj: Record<string, unknown>; path: string[] }[] = [
    {
      name: 'an authorization header',
      obj: { headers: { authorization: 'Bearer SECRET' } },
      path: ['headers', 'authorization'],
    },
    {
      name: 'a request authorization header',
      obj: { req: { headers: { authorization: 'Bearer SECRET' } } },
      path: ['req', 'headers', 'authorization'],
    },
    { name: 'a cookie header', obj: { headers: { cookie: 'sid=SECRET' } }, path: ['headers', 'cookie'] },
    {
      name: 'a set-cookie header',
      obj: { res: { headers: { 'set-cookie': 'sid=SECRET' } } },
      path: ['res', 'headers', 'set-cookie'],
    },
    { name: 'a top-level token', obj: { token: 'SECRET' }, path: ['token'] },
    { name: 'a nested token', obj: { auth: { token: 'SECRET' } }, path: ['auth', 'token'] },
    { name: 'a nested join token', obj: { runtime: { joinToken: 'SECRET' } }, path: ['runtime', 'joinToken'] },
    { name: 'a list of join tokens', obj: { config: { joinTokens: ['SECRET'] } }, path: ['config', 'joinTokens'] },
    {
      name: 'a redis URL with a password',
      obj: { routeCache: { redisUrl: 'redis://:SECRET@h' } },
      path: ['routeCache', 'redisUrl'],
    },
  ];
  for (const c of cases) {
    it(`redacts ${c.name}`, () => {
      const { logger, lines, last } = capture();
      logger.info(c.obj, 'hello');
      assert.ok(!lines.join('').includes('SECRET'), lines.join(''));
      let node: unknown = last();
      for (const key of c.path) node = (node as Record<string, unknown>)[key];
      assert.equal(node, LOG_CENSOR);
    });
  }

  it('redacts extra paths given by the caller and keeps other fields', () => {
    const { logger, last } = capture(['session.key']);
    logger.info({ session: { key: 'SECRET', id: 's1' }, headers: { 'content-type': 'text/plain' } });
    const line = last();
    assert.deepEqual(line.session, { key: LOG_CENSOR, id: 's1' });
    assert.deepEqual(line.headers, { 'content-type': 'text/plain' });
    assert.equal(line.name, 'test');
  });

  it('drops lines below the level', () => {
    const lines: string[] = [];
    const logger = createLogger({
      name: 't',
      level: 'warn',
      destination: { write: (s: string) => void lines.push(s) },
    });
    logger.info('no');
    logger.warn('yes');
    assert.equal(lines.length, 1);
    assert.equal((JSON.parse(lines[0]!) as { msg: string }).msg, 'yes');
  });
});
