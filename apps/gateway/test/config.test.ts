import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, loadConfig } from '@switchyard/service';
import { gatewayConfigSchema } from '../src/config.ts';

const load = (env: Record<string, string>) =>
  loadConfig(gatewayConfigSchema, { argv: [], env: { SWITCHYARD_SCHEDULERS: 'http://127.0.0.1:7070', ...env } });

/** One test per case: the config of `env` is refused at start, its problems matching `says`. */
function refusesAtStart(cases: readonly [name: string, env: Record<string, string>, says: RegExp][]): void {
  for (const [name, env, says] of cases) {
    it(`refuses at start ${name}`, () => {
      assert.throws(
        () => load(env),
        (error: unknown) => {
          assert.ok(error instanceof ConfigError, String(error));
          assert.match(error.problems.join('\n'), says);
          return true;
        },
      );
    });
  }
}

describe('gateway config: defaultClass', () => {
  it('takes an identity value', () => {
    assert.equal(load({ SWITCHYARD_DEFAULT_CLASS: 'tools.v2' }).defaultClass, 'tools.v2');
  });

  // Every request naming no class is scheduled in it: one the scheduler refuses would fail them all (500).
  it('refuses at start a class that is not an identity value', () => {
    for (const value of ['my tools', 'a/b', 'x'.repeat(129)]) {
      assert.throws(
        () => load({ SWITCHYARD_DEFAULT_CLASS: value }),
        (error: unknown) => {
          assert.ok(error instanceof ConfigError, String(error));
          assert.match(error.problems.join('\n'), /defaultClass/);
          return true;
        },
      );
    }
  });
});

describe('gateway config: identity strategies', () => {
  it('takes a chain of strategies', () => {
    const value = 'header:Mcp-Param-Sandbox,query:sandbox,path:process,principal';
    assert.equal(load({ SWITCHYARD_IDENTITY_PROCESS: value }).identity.process, value);
  });

  // A client's copy of a header Switchyard sets is stripped before it goes on: read here, it would be trusted.
  it('refuses at start a header no client may name a sandbox by, and a path parameter there is not', () => {
    for (const value of ['header:X-Switchyard-Principal', 'header:X-Tenant,header:Connection', 'path:sandbox']) {
      assert.throws(
        () => load({ SWITCHYARD_IDENTITY_PROCESS: value }),
        (error: unknown) => {
          assert.ok(error instanceof ConfigError, String(error));
          assert.match(error.problems.join('\n'), /identity\.process/);
          return true;
        },
        value,
      );
    }
  });
});

describe('gateway config: routeCache.redisUrl', () => {
  it('takes a password, an ACL user, a database number and TLS', () => {
    for (const url of [
      'redis://:p%23ss%40word@redis.example:6379',
      'redis://gateway:s3cret@10.0.0.5:6380/3',
      'rediss://default:s3cret@redis.example:6380/0?family=6',
    ]) {
      assert.equal(load({ SWITCHYARD_ROUTE_CACHE_REDIS_URL: url }).routeCache.redisUrl, url);
    }
  });

  // ioredis reads each of these as something else (another host, a NaN database, TLS off), and the
  // gateway ran ready without a shared cache; the problem names the option but never echoes the URL.
  it('refuses at start a URL ioredis would misread, without quoting it', () => {
    for (const url of [
      'redis://:SECRET#1@redis.example:6379',
      'redis://:SECRET/1@redis.example:6379',
      'redis://:SECRET%zz@redis.example:6379',
      'redis://:SECRET@redis.example:6379/cache',
      'REDISS://:SECRET@redis.example:6380',
      'http://:SECRET@redis.example:6379',
      'redis.example:6379',
      'redis://:SECRET@redis.example:6379?enableOfflineQueue=false',
      'redis://:SECRET@redis.example:6379?db=x',
    ]) {
      assert.throws(
        () => load({ SWITCHYARD_ROUTE_CACHE_REDIS_URL: url }),
        (error: unknown) => {
          assert.ok(error instanceof ConfigError, String(error));
          assert.match(error.problems.join('\n'), /routeCache\.redisUrl/);
          assert.doesNotMatch(error.message, /SECRET/);
          return true;
        },
        url,
      );
    }
  });
});

describe('gateway config: routeCache.redisKeyPrefix', () => {
  it('defaults to the prefix every replica of a deployment shares, and takes another', () => {
    assert.equal(load({}).routeCache.redisKeyPrefix, 'switchyard:route:');
    assert.equal(
      load({ SWITCHYARD_ROUTE_CACHE_REDIS_KEY_PREFIX: 'prod:route:' }).routeCache.redisKeyPrefix,
      'prod:route:',
    );
  });

  it('refuses at start a prefix an ACL key pattern could not hold the gateways to', () => {
    for (const value of ['prod route:', 'prod\u00e9:', 'x'.repeat(65)]) {
      assert.throws(
        () => load({ SWITCHYARD_ROUTE_CACHE_REDIS_KEY_PREFIX: value }),
        (error: unknown) =>
          error instanceof ConfigError && /routeCache\.redisKeyPrefix/.test(error.problems.join('\n')),
        JSON.stringify(value),
      );
    }
  });
});

describe('gateway config: auth.principalClaim', () => {
  it('defaults to sub, and takes another claim, a namespaced one included', () => {
    assert.equal(load({}).auth.principalClaim, 'sub');
    assert.equal(load({ SWITCHYARD_AUTH_PRINCIPAL_CLAIM: 'client_id' }).auth.principalClaim, 'client_id');
    const namespaced = load({ SWITCHYARD_AUTH_PRINCIPAL_CLAIM: 'https://example.com/uid' });
    assert.equal(namespaced.auth.principalClaim, 'https://example.com/uid');
  });

  // Named in a quoted error_description when a token lacks it.
  it('refuses at start a name with a space, a quote or a backslash', () => {
    for (const value of ['client id', 'a"b', 'a\\b']) {
      assert.throws(
        () => load({ SWITCHYARD_AUTH_PRINCIPAL_CLAIM: value }),
        (error: unknown) => {
          assert.ok(error instanceof ConfigError, String(error));
          assert.match(error.problems.join('\n'), /auth\.principalClaim/);
          return true;
        },
      );
    }
  });
});

describe('gateway config: auth.audience', () => {
  const fromFile = (text: string) =>
    loadConfig(gatewayConfigSchema, {
      argv: ['--config', 'gateway.yaml'],
      env: { SWITCHYARD_SCHEDULERS: 'http://127.0.0.1:7070' },
      readFile: () => text,
    });

  it('takes a list, from env or the file', () => {
    const both = ['switchyard', 'https://mcp.example.com/mcp'];
    assert.deepEqual(load({ SWITCHYARD_AUTH_AUDIENCE: both.join(',') }).auth.audience, both);
    assert.deepEqual(fromFile(`auth:\n  audience: [${both.join(', ')}]\n`).auth.audience, both);
  });

  it('takes one audience as it did, from env or the file', () => {
    assert.deepEqual(load({ SWITCHYARD_AUTH_AUDIENCE: 'switchyard' }).auth.audience, ['switchyard']);
    assert.deepEqual(fromFile('auth:\n  audience: switchyard\n').auth.audience, ['switchyard']);
  });
});

describe('gateway config: auth.requireAccessTokenType', () => {
  it('is off by default, and turned on from env', () => {
    assert.equal(load({}).auth.requireAccessTokenType, false);
    const jwt = { SWITCHYARD_AUTH_MODE: 'jwt', SWITCHYARD_AUTH_JWKS_URL: 'https://login.example.com/jwks' };
    const required = load({ ...jwt, SWITCHYARD_AUTH_REQUIRE_ACCESS_TOKEN_TYPE: 'true' });
    assert.equal(required.auth.requireAccessTokenType, true);
  });

  // An operator would believe it enforced.
  it('refuses at start to require it outside mode jwt', () => {
    assert.throws(
      () => load({ SWITCHYARD_AUTH_REQUIRE_ACCESS_TOKEN_TYPE: 'true' }),
      (error: unknown) => error instanceof ConfigError && /auth\.requireAccessTokenType/.test(error.problems.join()),
    );
  });
});

describe('gateway config: auth.algorithms', () => {
  it('defaults to the asymmetric algorithms, and takes a list', () => {
    const defaults = load({}).auth.algorithms;
    assert.ok(defaults.includes('RS256') && defaults.includes('ES256') && defaults.includes('EdDSA'), String(defaults));
    assert.ok(!defaults.some((alg) => /^HS|^none$|^ML-DSA/.test(alg)), String(defaults));
    assert.deepEqual(load({ SWITCHYARD_AUTH_ALGORITHMS: 'RS256,PS256' }).auth.algorithms, ['RS256', 'PS256']);
  });

  it('refuses at start none and HMAC', () => {
    for (const value of ['none', 'HS256', 'RS256,HS512']) {
      assert.throws(
        () => load({ SWITCHYARD_AUTH_ALGORITHMS: value }),
        (error: unknown) => {
          assert.ok(error instanceof ConfigError, String(error));
          assert.match(error.problems.join('\n'), /SWITCHYARD_AUTH_ALGORITHMS/);
          return true;
        },
      );
    }
  });
});

describe('gateway config: auth.scopeClaims', () => {
  it('defaults to scope, else scp, and takes a list (Entra ID: scp, roles)', () => {
    assert.deepEqual(load({}).auth.scopeClaims, ['scope', 'scp']);
    assert.deepEqual(load({ SWITCHYARD_AUTH_SCOPE_CLAIMS: 'scp,roles' }).auth.scopeClaims, ['scp', 'roles']);
  });

  it('refuses at start a claim name with a space', () => {
    assert.throws(
      () => load({ SWITCHYARD_AUTH_SCOPE_CLAIMS: 'my scopes' }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError, String(error));
        assert.match(error.problems.join('\n'), /SWITCHYARD_AUTH_SCOPE_CLAIMS/);
        return true;
      },
    );
  });
});

describe('gateway config: auth.requiredScopes', () => {
  const jwt = { SWITCHYARD_AUTH_MODE: 'jwt', SWITCHYARD_AUTH_JWKS_URL: 'https://login.example.com/jwks' };
  it('defaults to none, and takes scopes among auth.scopes', () => {
    assert.deepEqual(load(jwt).auth.requiredScopes, []);
    const config = load({
      ...jwt,
      SWITCHYARD_AUTH_SCOPES: 'mcp:tools,offline_access',
      SWITCHYARD_AUTH_REQUIRED_SCOPES: 'mcp:tools',
    });
    assert.deepEqual(config.auth.requiredScopes, ['mcp:tools']);
  });

  const refused: [string, Record<string, string>, RegExp][] = [
    ['outside mode jwt', { SWITCHYARD_AUTH_REQUIRED_SCOPES: 'mcp:tools' }, /needs mode jwt/],
    [
      'a scope clients are not told to ask for',
      { ...jwt, SWITCHYARD_AUTH_SCOPES: 'mcp:tools', SWITCHYARD_AUTH_REQUIRED_SCOPES: 'mcp:admin' },
      /mcp:admin is not in auth\.scopes/,
    ],
    ['a scope with a quote', { ...jwt, SWITCHYARD_AUTH_REQUIRED_SCOPES: 'a"b' }, /scope token/],
  ];
  refusesAtStart(refused);
});

describe('gateway config: auth.classScopes', () => {
  const jwt = { SWITCHYARD_AUTH_MODE: 'jwt', SWITCHYARD_AUTH_JWKS_URL: 'https://login.example.com/jwks' };
  const classes = { 'prod-db': ['db:read', 'db:write'], billing: ['billing'] };

  it('defaults to none, and takes a map of class to scopes from the file, env or a flag (JSON)', () => {
    assert.deepEqual(load(jwt).auth.classScopes, {});
    const file = loadConfig(gatewayConfigSchema, {
      argv: ['--config', 'gateway.yaml'],
      env: { SWITCHYARD_SCHEDULERS: 'http://127.0.0.1:7070', ...jwt },
      readFile: () => 'auth:\n  classScopes:\n    prod-db: [db:read, db:write]\n    billing: [billing]\n',
    });
    assert.deepEqual(file.auth.classScopes, classes);
    assert.deepEqual(load({ ...jwt, SWITCHYARD_AUTH_CLASS_SCOPES: JSON.stringify(classes) }).auth.classScopes, classes);
    const flag = loadConfig(gatewayConfigSchema, {
      argv: ['--auth.class-scopes', JSON.stringify(classes)],
      env: { SWITCHYARD_SCHEDULERS: 'http://127.0.0.1:7070', ...jwt },
    });
    assert.deepEqual(flag.auth.classScopes, classes);
  });

  const refused: [string, Record<string, string>, RegExp][] = [
    ['outside mode jwt', { SWITCHYARD_AUTH_CLASS_SCOPES: '{"prod-db":["db:read"]}' }, /classScopes.*needs mode jwt/],
    [
      'a scope clients are not told to ask for',
      { ...jwt, SWITCHYARD_AUTH_SCOPES: 'mcp:tools', SWITCHYARD_AUTH_CLASS_SCOPES: '{"prod-db":["db:read"]}' },
      /classScopes\.prod-db.*db:read is not in auth\.scopes/,
    ],
    ['a scope with a quote', { ...jwt, SWITCHYARD_AUTH_CLASS_SCOPES: '{"prod-db":["a\\"b"]}' }, /scope token/],
    ['a class without scopes', { ...jwt, SWITCHYARD_AUTH_CLASS_SCOPES: '{"prod-db":[]}' }, /classScopes\.prod-db/],
    ['a name that is no class', { ...jwt, SWITCHYARD_AUTH_CLASS_SCOPES: '{"prod db":["db:read"]}' }, /classScopes/],
    ['scopes as one string', { ...jwt, SWITCHYARD_AUTH_CLASS_SCOPES: '{"prod-db":"db:read"}' }, /classScopes/],
  ];
  refusesAtStart(refused);
});

describe('gateway config: auth.toolScopes', () => {
  const jwt = { SWITCHYARD_AUTH_MODE: 'jwt', SWITCHYARD_AUTH_JWKS_URL: 'https://login.example.com/jwks' };
  const tools = { delete_repo: ['repo:admin'], rotate_keys: ['keys:admin', 'repo:admin'] };

  it('defaults to none, and takes a map of tool to scopes from the file, env or a flag (JSON)', () => {
    assert.deepEqual(load(jwt).auth.toolScopes, {});
    const file = loadConfig(gatewayConfigSchema, {
      argv: ['--config', 'gateway.yaml'],
      env: { SWITCHYARD_SCHEDULERS: 'http://127.0.0.1:7070', ...jwt },
      readFile: () =>
        'auth:\n  toolScopes:\n    delete_repo: [repo:admin]\n    rotate_keys: [keys:admin, repo:admin]\n',
    });
    assert.deepEqual(file.auth.toolScopes, tools);
    assert.deepEqual(load({ ...jwt, SWITCHYARD_AUTH_TOOL_SCOPES: JSON.stringify(tools) }).auth.toolScopes, tools);
    const flag = loadConfig(gatewayConfigSchema, {
      argv: ['--auth.tool-scopes', JSON.stringify(tools)],
      env: { SWITCHYARD_SCHEDULERS: 'http://127.0.0.1:7070', ...jwt },
    });
    assert.deepEqual(flag.auth.toolScopes, tools);
  });

  const refused: [string, Record<string, string>, RegExp][] = [
    [
      'outside mode jwt',
      { SWITCHYARD_AUTH_TOOL_SCOPES: '{"delete_repo":["repo:admin"]}' },
      /toolScopes.*needs mode jwt/,
    ],
    [
      'a scope clients are not told to ask for',
      { ...jwt, SWITCHYARD_AUTH_SCOPES: 'mcp:tools', SWITCHYARD_AUTH_TOOL_SCOPES: '{"delete_repo":["repo:admin"]}' },
      /toolScopes\.delete_repo.*repo:admin is not in auth\.scopes/,
    ],
    ['a scope with a quote', { ...jwt, SWITCHYARD_AUTH_TOOL_SCOPES: '{"delete_repo":["a\\"b"]}' }, /scope token/],
    ['a tool without scopes', { ...jwt, SWITCHYARD_AUTH_TOOL_SCOPES: '{"delete_repo":[]}' }, /toolScopes\.delete_repo/],
    ['an empty tool name', { ...jwt, SWITCHYARD_AUTH_TOOL_SCOPES: '{"":["repo:admin"]}' }, /toolScopes/],
    ['scopes as one string', { ...jwt, SWITCHYARD_AUTH_TOOL_SCOPES: '{"delete_repo":"repo:admin"}' }, /toolScopes/],
  ];
  refusesAtStart(refused);
});
