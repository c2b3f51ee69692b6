// The check behind auth.classScopes, without a gateway: which classes a
// token's scopes admit, and the class a session id says it was opened to.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { InsufficientScopeError } from '../src/challenge.ts';
import { ClassScopes, createClassScopes } from '../src/class-scopes.ts';
import { randomId } from '../src/identity.ts';

const scopes = new ClassScopes({ 'prod-db': ['db:read', 'db:write'], billing: ['billing'] }, ['mcp:tools']);
const granted = (...s: string[]): ReadonlySet<string> => new Set(s);

describe('ClassScopes.admit', () => {
  const cases: {
    name: string;
    cls: string;
    granted: ReadonlySet<string> | undefined;
    also?: string[];
    needs?: string[];
  }[] = [
    {
      name: 'a listed class to a token with every scope',
      cls: 'prod-db',
      granted: granted('mcp:tools', 'db:read', 'db:write'),
    },
    { name: 'a class not listed to a token with none', cls: 'demo', granted: granted() },
    { name: 'a class not listed to a credential without scopes', cls: 'demo', granted: undefined },
    {
      name: 'no listed class to a token short of one of its scopes',
      cls: 'prod-db',
      granted: granted('mcp:tools', 'db:read'),
      needs: ['mcp:tools', 'db:read', 'db:write'],
    },
    {
      name: 'no listed class to a credential without scopes',
      cls: 'billing',
      granted: undefined,
      needs: ['mcp:tools', 'billing'],
    },
    { name: 'no class by a prefix of its name', cls: 'prod', granted: granted() },
    {
      name: "no listed class to a token short of its scopes, naming those of the request's tools too",
      cls: 'billing',
      granted: granted('mcp:tools', 'repo:admin'),
      also: ['mcp:tools', 'repo:admin'],
      needs: ['mcp:tools', 'billing', 'repo:admin'],
    },
    {
      name: "a listed class to a token with its scopes, short of the request's tools' (theirs to refuse)",
      cls: 'billing',
      granted: granted('mcp:tools', 'billing'),
      also: ['repo:admin'],
    },
  ];
  for (const c of cases) {
    it(`admits ${c.name}`, () => {
      const admit = (): void => scopes.admit(c.cls, c.granted, c.also);
      if (c.needs === undefined) return admit();
      assert.throws(admit, (error: unknown) => {
        assert.ok(error instanceof InsufficientScopeError);
        assert.equal(error.code, 'forbidden');
        assert.deepEqual(error.scopes, c.needs);
        assert.equal(error.message, `Forbidden: token lacks a scope of class ${c.cls}`);
        return true;
      });
    });
  }
});

describe('ClassScopes.sessionClass', () => {
  const minted = randomId();

  it('reads the class a session was opened to from its id', () => {
    const id = scopes.sessionId(minted, 'prod-db');
    assert.match(id, new RegExp(`^${minted}\\.[0-9a-f]{16}$`));
    assert.equal(scopes.sessionClass(id), 'prod-db');
  });

  it('reads no class for a session of a class not listed', () => {
    assert.equal(scopes.sessionClass(scopes.sessionId(minted, 'demo')), undefined);
  });

  it('reads the same class on every replica, whatever order their options list the classes in', () => {
    const other = new ClassScopes({ billing: ['billing'], 'prod-db': ['db:read', 'db:write'] });
    const id = scopes.sessionId(minted, 'billing');
    assert.equal(other.sessionId(minted, 'billing'), id);
    assert.equal(other.sessionClass(id), 'billing');
  });

  const untagged: [string, string][] = [
    ['minted without a tag', minted],
    ['with a tag that is not hex', `${minted}.zzzzzzzzzzzzzzzz`],
    ['with a short tag', `${minted}.0123`],
    ['made up', 'my-session'],
  ];
  for (const [name, id] of untagged) {
    it(`answers a session id ${name} as a lost session (404)`, () => {
      assert.throws(
        () => scopes.sessionClass(id),
        (error: unknown) => (error as { code?: unknown }).code === 'session_not_found',
      );
    });
  }
});

describe('createClassScopes', () => {
  it('makes nothing without classes, so a gateway spends nothing on them', () => {
    assert.equal(createClassScopes({ mode: 'jwt', jwksUrl: 'https://login.example.com/jwks.json' }), undefined);
    assert.equal(createClassScopes({ mode: 'jwt', jwksUrl: 'https://x.test/jwks', classScopes: {} }), undefined);
  });
});
