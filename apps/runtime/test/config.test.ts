import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { ConfigError, loadConfig } from '@switchyard/service';
import { healthListenerOn, runtimeConfigSchema } from '../src/config.ts';

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

// The check must refuse what fetch refuses, and only that: every value below
// is sent by fetch to a real server on loopback, and the config is loaded
// with the same values, one header each.
describe('runtime config: header values of an http class, against fetch', () => {
  const server = createServer((_req, res) => res.end());
  before(() => new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve)));
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('refuses at start exactly the values fetch refuses to send', async () => {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    // Every character up to U+017F (controls, DEL, Latin-1, past it), and one far past it.
    const chars = [...Array.from({ length: 0x180 }, (_, code) => String.fromCharCode(code)), '€'];
    const values = new Map(chars.map((c, i) => [`x-${i}`, `a${c}b`]));
    const fetchRefuses = new Set<string>();
    for (const [name, value] of values) {
      try {
        const res = await fetch(url, { headers: { [name]: value } });
        await res.arrayBuffer();
      } catch {
        fetchRefuses.add(name);
      }
    }
    assert.ok(fetchRefuses.size > 30 && fetchRefuses.size < values.size, `fetch refused ${fetchRefuses.size}`);
    let configRefuses = new Set<string>();
    try {
      load({
        SWITCHYARD_CLASSES: JSON.stringify({ remote: { engine: 'http', url, headers: Object.fromEntries(values) } }),
      });
    } catch (error) {
      assert.ok(error instanceof ConfigError, String(error));
      const named = error.problems.map((p) => /^classes\.remote\.headers\.(x-\d+):/.exec(p)?.[1]);
      configRefuses = new Set(named.filter((n): n is string => n !== undefined));
    }
    const shown = (names: Iterable<string>): string[] => [...names].map((n) => JSON.stringify(values.get(n)));
    assert.deepEqual(
      shown([...fetchRefuses].filter((n) => !configRefuses.has(n))),
      [],
      'values fetch refuses that the config takes',
    );
    assert.deepEqual(
      shown([...configRefuses].filter((n) => !fetchRefuses.has(n))),
      [],
      'values the config refuses that fetch sends',
    );
  });
});

// Schedulers' latest_version rules skip a runtime whose version they cannot
// parse, without a word; such a version is refused where it is configured.
describe('runtime config: version', () => {
  for (const version of ['1.4.2', 'v1.4.2', '2.0.0-rc.1+build.7']) {
    it(`takes ${version}, a version latest_version rules rank`, () => {
      assert.equal(load({ SWITCHYARD_VERSION: version }).version, version);
    });
  }
  for (const version of ['banana', '1.4', 'git-3f2c1a9']) {
    it(`refuses at start ${version}, naming the key`, () =>
      refuses({ SWITCHYARD_VERSION: version }, /^version: /m, /must be a semantic version/));
  }
});

// health.port 0 turned the listener off, so it could not take a free port
// as every other listener can; `enabled` asks for it, and a config that
// names no `enabled` keeps meaning what it meant.
describe('runtime config: the health listener', () => {
  const cases: ReadonlyArray<{ name: string; env: Record<string, string>; on: boolean; port: number }> = [
    { name: 'is off by default', env: {}, on: false, port: 0 },
    { name: 'is off on port 0 when enabled is not named', env: { SWITCHYARD_HEALTH_PORT: '0' }, on: false, port: 0 },
    { name: 'is on at the port named', env: { SWITCHYARD_HEALTH_PORT: '7090' }, on: true, port: 7090 },
    {
      name: 'takes a free port when enabled on port 0',
      env: { SWITCHYARD_HEALTH_ENABLED: 'true', SWITCHYARD_HEALTH_PORT: '0' },
      on: true,
      port: 0,
    },
    { name: 'is on at port 0 when only enabled', env: { SWITCHYARD_HEALTH_ENABLED: 'true' }, on: true, port: 0 },
    {
      name: 'is off when disabled, whatever its port',
      env: { SWITCHYARD_HEALTH_ENABLED: 'false', SWITCHYARD_HEALTH_PORT: '7090' },
      on: false,
      port: 7090,
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const { health } = load(c.env);
      assert.equal(healthListenerOn(health), c.on);
      assert.equal(health.port, c.port);
    });
  }
});

// JSON and YAML make an own `__proto__` key, which the config's map type
// leaves out without a word: the label was lost and the runtime started.
describe('runtime config: a __proto__ metadata key', () => {
  const dir = mkdtempSync(join(tmpdir(), 'runtime-config-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('is refused at start from the environment, naming the key and why', () =>
    refuses(
      { SWITCHYARD_METADATA: '{"zone":"eu-1","__proto__":"x"}' },
      /^metadata\.__proto__: /m,
      /'__proto__' cannot be a key: JavaScript objects take it for their prototype.*SWITCHYARD_METADATA/,
    ));

  for (const [name, text] of [
    ['runtime.yaml', 'metadata:\n  zone: eu-1\n  __proto__: x\n'],
    ['runtime.json', '{"metadata": {"zone": "eu-1", "__proto__": "x"}}'],
  ] as const) {
    it(`is refused at start from a config file (${name}), naming the key and the file`, () => {
      const path = join(dir, name);
      writeFileSync(path, text);
      refuses({ SWITCHYARD_CONFIG: path }, /^metadata\.__proto__: /m, new RegExp(`cannot be a key.*${name}`));
    });
  }
});

// ioredis reads each of these as something else (another host, a NaN database, TLS off), and the
// runtime's metering went elsewhere or nowhere; the problem names the option but never echoes the URL.
describe('runtime config: metering.redisUrl', () => {
  it('takes a password, an ACL user, a database number and TLS', () => {
    for (const url of [
      'redis://:p%23ss%40word@redis.example:6379',
      'redis://runtime:s3cret@10.0.0.5:6380/3',
      'rediss://default:s3cret@redis.example:6380/0?family=6',
    ]) {
      assert.equal(load({ SWITCHYARD_METERING_REDIS_URL: url }).metering.redisUrl, url);
    }
  });

  for (const url of [
    'redis://:SECRET#1@redis.example:6379',
    'redis://:SECRET/1@redis.example:6379',
    'redis://:SECRET%zz@redis.example:6379',
    'redis://:SECRET@redis.example:6379/metering',
    'REDISS://:SECRET@redis.example:6380',
    'redis.example:6379',
    'redis://:SECRET@redis.example:6379?db=x',
  ]) {
    it(`refuses at start ${url.replace('SECRET', '…')} without quoting it`, () => {
      assert.throws(
        () => load({ SWITCHYARD_METERING_REDIS_URL: url }),
        (error: unknown) => {
          assert.ok(error instanceof ConfigError, String(error));
          assert.match(error.problems.join('\n'), /metering\.redisUrl/);
          assert.doesNotMatch(error.message, /SECRET/);
          return true;
        },
      );
    });
  }
});

// The sink says where lifecycle events go; a Redis URL it would not write to is a config not meant.
describe('runtime config: metering.sink', () => {
  const url = 'redis://redis.example:6379';
  it('is unset by default, and takes log, redis (with a URL) and none', () => {
    assert.equal(load({}).metering.sink, undefined);
    assert.equal(load({ SWITCHYARD_METERING_SINK: 'none' }).metering.sink, 'none');
    assert.equal(load({ SWITCHYARD_METERING_SINK: 'log' }).metering.sink, 'log');
    const redis = load({ SWITCHYARD_METERING_SINK: 'redis', SWITCHYARD_METERING_REDIS_URL: url }).metering;
    assert.deepEqual([redis.sink, redis.redisUrl], ['redis', url]);
  });

  it('refuses sink redis without redisUrl', () =>
    refuses({ SWITCHYARD_METERING_SINK: 'redis' }, /metering\.redisUrl/, /sink redis needs redisUrl/));

  for (const sink of ['log', 'none']) {
    it(`refuses redisUrl beside sink ${sink}`, () =>
      refuses(
        { SWITCHYARD_METERING_SINK: sink, SWITCHYARD_METERING_REDIS_URL: url },
        /metering\.sink/,
        new RegExp(`sink ${sink} writes nothing to redisUrl`),
      ));
  }

  it('refuses a sink it does not know', () =>
    refuses({ SWITCHYARD_METERING_SINK: 'off' }, /SWITCHYARD_METERING_SINK/, /one of log, redis, none/));
});

// Events held while the metering Redis is away: a bound, so a long outage costs memory up to it only.
describe('runtime config: metering.queueLengthMax', () => {
  it('holds 10,000 events by default, and takes another bound', () => {
    assert.equal(load({}).metering.queueLengthMax, 10_000);
    assert.equal(load({ SWITCHYARD_METERING_QUEUE_LENGTH_MAX: '500' }).metering.queueLengthMax, 500);
  });

  it('refuses no room at all, and more than a million events', () => {
    refuses({ SWITCHYARD_METERING_QUEUE_LENGTH_MAX: '0' }, /metering\.queueLengthMax/, />=1/);
    refuses({ SWITCHYARD_METERING_QUEUE_LENGTH_MAX: '1000001' }, /metering\.queueLengthMax/, /<=1000000/);
  });
});

describe('runtime config: how long a class may take to start', () => {
  const stdio = (extra: Record<string, unknown>) =>
    JSON.stringify({ tool: { engine: 'stdio', command: 'mcp-server', ...extra } });

  it('gives a server 30 s to answer initialize unless the class says otherwise', () => {
    assert.equal(load({ SWITCHYARD_CLASSES: stdio({}) }).classes.tool?.startTimeoutSeconds, 30);
    assert.equal(
      load({ SWITCHYARD_CLASSES: stdio({ startTimeoutSeconds: 120 }) }).classes.tool?.startTimeoutSeconds,
      120,
    );
  });

  it('refuses a start timeout under a second', () =>
    refuses({ SWITCHYARD_CLASSES: stdio({ startTimeoutSeconds: 0 }) }, /classes\.tool\.startTimeoutSeconds/, /1/));
});

// A class name is what clients send in X-Switchyard-Class: one the gateway
// would refuse (400) is refused at start, saying what a name may be.
describe('runtime config: class names', () => {
  it('refuses a name with a character a client could not send, saying which may be used', () =>
    refuses(
      { SWITCHYARD_CLASSES: JSON.stringify({ 'my class!': { engine: 'builtin' } }) },
      /classes\.my class!/,
      /class name: 1-128 characters from \[A-Za-z0-9\._:@-\]/,
    ));
});

// A setting of another engine than the class's is a mistake (an engine
// changed and its settings left, an API key put in env of an http class),
// which the runtime would otherwise ignore without a word.
describe('runtime config: settings of another engine', () => {
  const one = (c: Record<string, unknown>) => JSON.stringify({ mine: c });

  const refused: { name: string; cls: Record<string, unknown>; key: string; why: RegExp }[] = [
    {
      name: 'a url of a stdio class',
      cls: { engine: 'stdio', command: 'mcp-server', url: 'http://127.0.0.1:9/mcp' },
      key: 'url',
      why: /engine stdio does not use url \(engine http\)/,
    },
    {
      name: 'headers of a stdio class',
      cls: { engine: 'stdio', command: 'mcp-server', headers: { 'x-api-key': 'k' } },
      key: 'headers',
      why: /engine stdio does not use headers \(engine http\)/,
    },
    {
      name: 'an env of an http class',
      cls: { engine: 'http', url: 'http://127.0.0.1:9/mcp', env: { API_KEY: 'k' } },
      key: 'env',
      why: /engine http does not use env \(engine stdio\)/,
    },
    {
      name: 'a command of an http class',
      cls: { engine: 'http', url: 'http://127.0.0.1:9/mcp', command: 'mcp-server' },
      key: 'command',
      why: /engine http does not use command/,
    },
    {
      name: 'a cwd of an http class',
      cls: { engine: 'http', url: 'http://127.0.0.1:9/mcp', cwd: '/srv/tools' },
      key: 'cwd',
      why: /engine http does not use cwd \(engine stdio\)/,
    },
    {
      name: 'a cwd of a builtin class',
      cls: { engine: 'builtin', cwd: '/srv/tools' },
      key: 'cwd',
      why: /engine builtin does not use cwd \(engine stdio\)/,
    },
    {
      name: 'args of a builtin class',
      cls: { engine: 'builtin', args: ['--verbose'] },
      key: 'args',
      why: /engine builtin does not use args \(engine stdio\)/,
    },
  ];
  for (const c of refused) {
    it(`refuses at start ${c.name}, naming it`, () => {
      refuses({ SWITCHYARD_CLASSES: one(c.cls) }, new RegExp(`classes\\.mine\\.${c.key}`), c.why);
    });
  }

  it("takes each engine's own settings", () => {
    const config = load({
      SWITCHYARD_CLASSES: JSON.stringify({
        local: { engine: 'stdio', command: 'mcp-server', args: ['-v'], env: { K: 'v' }, cwd: '/srv/tools' },
        remote: { engine: 'http', url: 'http://127.0.0.1:9/mcp', headers: { 'x-api-key': 'k' } },
        demo: { engine: 'builtin', warmPool: 1 },
      }),
    });
    assert.deepEqual(Object.keys(config.classes), ['local', 'remote', 'demo']);
    assert.equal(config.classes.local?.cwd, '/srv/tools');
  });
});

// The runtime chart writes `classes` into this config file, and its values
// schema refuses keys it does not list: a class setting added here and not
// there could be set in a config file but not through the chart.
describe('runtime config: the runtime chart takes every class setting', () => {
  it('lists each key of a class in charts/runtime/values.schema.json', () => {
    const chart = JSON.parse(
      readFileSync(join(import.meta.dirname, '../../../charts/runtime/values.schema.json'), 'utf8'),
    );
    const app = z.toJSONSchema(runtimeConfigSchema, { io: 'input', unrepresentable: 'any' }) as typeof chart;
    const keys = (schema: typeof chart): string[] =>
      Object.keys(schema.properties.classes.additionalProperties.properties as object).sort();
    assert.deepEqual(keys(chart), keys(app));
  });
});
