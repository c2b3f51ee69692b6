// The check behind auth.toolScopes, without a gateway: which tools a body
// calls, read only when asked, and which of them a token's scopes admit.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { InsufficientScopeError } from '../src/challenge.ts';
import { ToolScopes, createToolScopes } from '../src/tool-scopes.ts';
import { inspectBody } from '../src/wire.ts';

const scopes = new ToolScopes({ delete_repo: ['repo:admin'], rotate_keys: ['keys:admin', 'repo:admin'] }, ['mcp']);
const granted = (...s: string[]): ReadonlySet<string> => new Set(s);

describe('ToolScopes.admit', () => {
  const cases: {
    name: string;
    tools: string[];
    granted: ReadonlySet<string> | undefined;
    also?: string[];
    needs?: string[];
  }[] = [
    {
      name: 'a listed tool to a token with every scope',
      tools: ['delete_repo'],
      granted: granted('mcp', 'repo:admin'),
    },
    { name: 'tools not listed to a token with none', tools: ['echo', 'counter'], granted: granted() },
    { name: 'no tool to a credential without scopes', tools: [], granted: undefined },
    {
      name: 'no listed tool to a token short of one of its scopes',
      tools: ['echo', 'rotate_keys'],
      granted: granted('mcp', 'repo:admin'),
      needs: ['mcp', 'keys:admin', 'repo:admin'],
    },
    {
      name: 'no batch to a token short of the scopes of one of its listed tools, naming those of all',
      tools: ['delete_repo', 'rotate_keys'],
      granted: granted('mcp', 'repo:admin'),
      needs: ['mcp', 'repo:admin', 'keys:admin'],
    },
    {
      name: 'no listed tool to a credential without scopes',
      tools: ['delete_repo'],
      granted: undefined,
      needs: ['mcp', 'repo:admin'],
    },
    { name: 'no tool by another case of its name', tools: ['Delete_Repo'], granted: granted() },
    { name: 'no tool named as an Object property', tools: ['__proto__', 'constructor'], granted: granted() },
    {
      name: "no listed tool to a token short of its scopes, naming those of the request's class first",
      tools: ['delete_repo'],
      granted: granted('mcp', 'db:read'),
      also: ['mcp', 'db:read'],
      needs: ['mcp', 'db:read', 'repo:admin'],
    },
    {
      name: "a listed tool to a token with its scopes, short of the request's class's (its to refuse)",
      tools: ['delete_repo'],
      granted: granted('mcp', 'repo:admin'),
      also: ['db:read'],
    },
  ];
  for (const c of cases) {
    it(`admits ${c.name}`, () => {
      const admit = (): void => scopes.admit(c.tools, c.granted, c.also);
      if (c.needs === undefined) return admit();
      assert.throws(admit, (error: unknown) => {
        assert.ok(error instanceof InsufficientScopeError);
        assert.equal(error.code, 'forbidden');
        assert.equal(error.reason, 'tool_scope');
        assert.deepEqual(error.scopes, c.needs);
        assert.equal(error.message, `Forbidden: token lacks a scope of tool ${c.tools.at(-1)}`);
        return true;
      });
    });
  }
});

describe('inspectBody tool names', () => {
  const call = (name: unknown, id?: number): Record<string, unknown> => ({
    jsonrpc: '2.0',
    ...(id === undefined ? {} : { id }),
    method: 'tools/call',
    params: { name },
  });
  const bodyOf = (value: unknown): Buffer => Buffer.from(JSON.stringify(value));

  it('reads none unless asked, so a gateway without auth.toolScopes spends nothing on them', () => {
    assert.equal(inspectBody(bodyOf(call('delete_repo', 1))).toolNames, undefined);
  });

  const cases: [string, unknown, string[]][] = [
    ['a call', call('delete_repo', 1), ['delete_repo']],
    ['a call sent as a notification', call('delete_repo'), ['delete_repo']],
    [
      'every call of a batch',
      [call('echo', 1), { jsonrpc: '2.0', id: 2, method: 'ping' }, call('delete_repo', 3)],
      ['echo', 'delete_repo'],
    ],
    ['no name that is not a string', call(['delete_repo'], 1), []],
    [
      'no name of another method',
      { jsonrpc: '2.0', id: 1, method: 'prompts/get', params: { name: 'delete_repo' } },
      [],
    ],
    ['no name of a response', { jsonrpc: '2.0', id: 1, result: { name: 'delete_repo' } }, []],
  ];
  for (const [name, body, tools] of cases) {
    it(`reads ${name}`, () => {
      assert.deepEqual(inspectBody(bodyOf(body), true).toolNames, tools);
    });
  }
});

describe('createToolScopes', () => {
  it('makes nothing without tools, so a gateway spends nothing on them', () => {
    assert.equal(createToolScopes({ mode: 'jwt', jwksUrl: 'https://login.example.com/jwks.json' }), undefined);
    assert.equal(createToolScopes({ mode: 'jwt', jwksUrl: 'https://x.test/jwks', toolScopes: {} }), undefined);
  });
});
