import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import {
  ConfigError,
  REDACTED,
  configFields,
  envNameOf,
  helpText,
  httpUrl,
  loadAppConfig,
  loadConfig,
  markdownReference,
  redactConfig,
} from '@switchyard/service';
import type { LoadConfigOptions } from '@switchyard/service';

const schema = z.object({
  port: z.number().int().default(7070).describe('Listener port.'),
  name: z.string().default('alpha').describe('A name.'),
  verbose: z.boolean().default(false).describe('Chatty.'),
  peers: z.array(z.string()).default([]).describe('Peer URLs.'),
  ratiosPct: z.array(z.number()).default([]).describe('Numbers.'),
  mode: z.enum(['memory', 'kubernetes']).default('memory').describe('Backend.'),
  election: z
    .object({
      leaseName: z.string().default('lease').describe('Lease name.'),
      leaseDurationMs: z.number().default(15000).describe('Lease duration.'),
    })
    .prefault({})
    .describe('Election.'),
  token: z.string().optional().meta({ secret: true }).describe('A secret token.'),
  tokens: z.array(z.string()).default([]).meta({ secret: true }).describe('Secret tokens.'),
  classes: z
    .record(
      z.string(),
      z.object({
        engine: z.enum(['a', 'b']),
        headers: z.record(z.string(), z.string()).optional().meta({ secret: true }),
      }),
    )
    .default({})
    .describe('Classes.'),
});

type Cfg = z.output<typeof schema>;
const files = new Map<string, string>();
const load = (argv: string[], env: Record<string, string> = {}, extra: Partial<LoadConfigOptions> = {}): Cfg =>
  loadConfig(schema, {
    argv,
    env,
    readFile: (p) => {
      const text = files.get(p);
      if (text === undefined) throw new Error(`ENOENT: ${p}`);
      return text;
    },
    ...extra,
  });

files.set('base.yaml', 'port: 1000\nname: from-file\nelection:\n  leaseName: file-lease\n');
files.set('other.json', '{"port": 2000, "verbose": true}');
files.set('unknown-top.yaml', 'port: 1\nbogus: 2\n');
files.set('unknown-nested.yaml', 'election:\n  leaseNam: x\n');
files.set('unknown-in-record.yaml', 'classes:\n  demo:\n    engine: a\n    enginee: b\n');
files.set('inherited-names.yaml', 'constructor: 1\nelection:\n  toString: x\n');
files.set('proto-key.yaml', '__proto__:\n  port: 1\n');
files.set('proto-in-record.yaml', 'classes:\n  __proto__:\n    engine: a\n  demo:\n    engine: b\n');
files.set('proto-in-nested-record.json', '{"classes": {"demo": {"engine": "a", "headers": {"__proto__": "x"}}}}');
files.set('list.yaml', '- 1\n- 2\n');
files.set('broken.yaml', 'port: [1,\n');
files.set('lists-of-one.yaml', 'peers: a,b\nratiosPct: 2.5\n');

describe('loadConfig layering', () => {
  const cases: { name: string; argv: string[]; env?: Record<string, string>; expect: Partial<Cfg> }[] = [
    { name: 'defaults apply when no source sets a key', argv: [], expect: { port: 7070, name: 'alpha' } },
    { name: 'a file overrides defaults', argv: ['--config', 'base.yaml'], expect: { port: 1000, name: 'from-file' } },
    {
      name: 'nested file keys merge with nested defaults',
      argv: ['--config=base.yaml'],
      expect: { election: { leaseName: 'file-lease', leaseDurationMs: 15000 } },
    },
    {
      name: 'env overrides the file',
      argv: ['--config', 'base.yaml'],
      env: { SWITCHYARD_PORT: '3000' },
      expect: { port: 3000, name: 'from-file' },
    },
    {
      name: 'flags override env',
      argv: ['--config', 'base.yaml', '--port', '4000'],
      env: { SWITCHYARD_PORT: '3000' },
      expect: { port: 4000 },
    },
    {
      name: 'SWITCHYARD_CONFIG names the file when --config is absent',
      argv: [],
      env: { SWITCHYARD_CONFIG: 'other.json' },
      expect: { port: 2000, verbose: true },
    },
    {
      name: '--config wins over SWITCHYARD_CONFIG',
      argv: ['--config', 'base.yaml'],
      env: { SWITCHYARD_CONFIG: 'other.json' },
      expect: { port: 1000, verbose: false },
    },
    {
      name: 'an empty env value counts as unset',
      argv: ['--config', 'base.yaml'],
      env: { SWITCHYARD_PORT: '' },
      expect: { port: 1000 },
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const config = load(c.argv, c.env);
      for (const [key, value] of Object.entries(c.expect)) assert.deepEqual(config[key as keyof Cfg], value, key);
    });
  }
});

describe('the keys a config file sets', () => {
  const keysOf = (argv: string[]): (readonly string[])[] => {
    const told: (readonly string[])[] = [];
    try {
      load(argv, {}, { onFileKeys: (keys) => told.push(keys) });
    } catch {
      // Told before the values are checked: a file whose values are refused has its keys told too.
    }
    return told;
  };

  it('are told once, top level only, whatever they are set to', () => {
    assert.deepEqual(keysOf(['--config', 'base.yaml']), [['port', 'name', 'election']]);
    assert.deepEqual(keysOf(['--config', 'unknown-top.yaml']), [['port', 'bogus']]);
  });

  it('are not told without a file, nor for one that cannot be read', () => {
    assert.deepEqual(keysOf([]), []);
    assert.deepEqual(keysOf(['--config', 'missing.yaml']), []);
  });
});

describe('option naming', () => {
  const names = [
    { path: ['port'], env: 'SWITCHYARD_PORT', flag: '--port' },
    { path: ['election', 'leaseName'], env: 'SWITCHYARD_ELECTION_LEASE_NAME', flag: '--election.lease-name' },
    {
      path: ['election', 'leaseDurationMs'],
      env: 'SWITCHYARD_ELECTION_LEASE_DURATION_MS',
      flag: '--election.lease-duration-ms',
    },
    { path: ['ratiosPct'], env: 'SWITCHYARD_RATIOS_PCT', flag: '--ratios-pct' },
  ];
  const fields = configFields(schema);
  for (const n of names) {
    it(`${n.path.join('.')} is ${n.env} and ${n.flag}`, () => {
      const field = fields.find((f) => f.key === n.path.join('.'));
      assert.ok(field);
      assert.equal(field.envName, n.env);
      assert.equal(envNameOf(n.path), n.env);
      assert.equal(field.flag, n.flag);
    });
  }
  const forms = [
    ['--election.lease-name=x'],
    ['--election.lease-name', 'x'],
    ['--election-lease-name', 'x'],
    ['--election-lease-name=x'],
  ];
  for (const argv of forms) {
    it(`the flag form ${argv.join(' ')} sets election.leaseName`, () => {
      assert.equal(load(argv).election.leaseName, 'x');
    });
  }
  it('env sets a nested key', () => {
    assert.equal(load([], { SWITCHYARD_ELECTION_LEASE_NAME: 'y' }).election.leaseName, 'y');
  });
});

describe('coercion', () => {
  const cases: { name: string; argv?: string[]; env?: Record<string, string>; key: keyof Cfg; value: unknown }[] = [
    { name: 'a number from env', env: { SWITCHYARD_PORT: '8081' }, key: 'port', value: 8081 },
    { name: 'true from env', env: { SWITCHYARD_VERBOSE: 'true' }, key: 'verbose', value: true },
    { name: '1 from env is true', env: { SWITCHYARD_VERBOSE: '1' }, key: 'verbose', value: true },
    { name: 'no from env is false', env: { SWITCHYARD_VERBOSE: 'no' }, key: 'verbose', value: false },
    { name: 'a bare boolean flag is true', argv: ['--verbose'], key: 'verbose', value: true },
    { name: 'a boolean flag takes a following false', argv: ['--verbose', 'false'], key: 'verbose', value: false },
    {
      name: 'arrays split on commas, blanks dropped',
      env: { SWITCHYARD_PEERS: 'a, b,,c' },
      key: 'peers',
      value: ['a', 'b', 'c'],
    },
    { name: 'array elements are coerced', env: { SWITCHYARD_RATIOS_PCT: '1,2.5' }, key: 'ratiosPct', value: [1, 2.5] },
    {
      name: 'repeated array flags append',
      argv: ['--peers', 'a', '--peers=b,c'],
      key: 'peers',
      value: ['a', 'b', 'c'],
    },
    // A list with one entry is the same list whatever the source says it in (a file's string is not split).
    { name: "a file's single value for a list", argv: ['--config', 'lists-of-one.yaml'], key: 'peers', value: ['a,b'] },
    {
      name: "a file's single number for a list",
      argv: ['--config', 'lists-of-one.yaml'],
      key: 'ratiosPct',
      value: [2.5],
    },
    {
      name: 'a record is read as JSON',
      argv: ['--classes', '{"x":{"engine":"a"}}'],
      key: 'classes',
      value: { x: { engine: 'a' } },
    },
  ];
  for (const c of cases) {
    it(c.name, () => assert.deepEqual(load(c.argv ?? [], c.env)[c.key], c.value));
  }
});

describe('unknown SWITCHYARD_ names set by nobody else', () => {
  it('get no hint about Kubernetes or the CLI', () => {
    assert.throws(
      () => load([], { SWITCHYARD_HELTH_PORT: '9000', SWITCHYARD_PROT: '1' }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        assert.doesNotMatch(error.message, /Kubernetes|CLI/);
        return true;
      },
    );
  });
});

describe('rejected configs', () => {
  const cases: { name: string; argv?: string[]; env?: Record<string, string>; mentions: string[] }[] = [
    { name: 'an unknown top-level file key is fatal', argv: ['--config', 'unknown-top.yaml'], mentions: ["'bogus'"] },
    {
      name: 'an unknown nested file key is fatal',
      argv: ['--config', 'unknown-nested.yaml'],
      mentions: ["'election.leaseNam'"],
    },
    {
      name: 'an unknown key inside a record entry is fatal',
      argv: ['--config', 'unknown-in-record.yaml'],
      mentions: ["'classes.demo.enginee'"],
    },
    {
      // Names every object has by inheritance, which a lookup in the schema's shape found.
      name: 'an unknown key named like an Object property is fatal',
      argv: ['--config', 'inherited-names.yaml'],
      mentions: ["'constructor'", "'election.toString'"],
    },
    {
      // Copied into the config by assignment, it set the copy's prototype and was seen by no check.
      name: 'a top-level __proto__ file key is fatal',
      argv: ['--config', 'proto-key.yaml'],
      mentions: ["unknown key '__proto__'"],
    },
    {
      // zod leaves a map's own __proto__ key out of the map without a word: the entry was lost unseen.
      name: "a map's __proto__ key in a file is fatal, named with why",
      argv: ['--config', 'proto-in-record.yaml'],
      mentions: ["classes.__proto__: '__proto__' cannot be a key", 'prototype', 'in config file proto-in-record.yaml'],
    },
    {
      name: "a __proto__ key of a map inside a map's entry is fatal",
      argv: ['--config', 'proto-in-nested-record.json'],
      mentions: ["classes.demo.headers.__proto__: '__proto__' cannot be a key"],
    },
    {
      name: "a map's __proto__ key from the environment or a flag is fatal, naming its source",
      argv: ['--classes', '{"__proto__": {"engine": "a"}}'],
      env: { SWITCHYARD_CLASSES: '{"demo": {"engine": "a", "headers": {"__proto__": "x"}}}' },
      mentions: [
        "classes.__proto__: '__proto__' cannot be a key",
        'from --classes',
        "classes.demo.headers.__proto__: '__proto__' cannot be a key",
        'from SWITCHYARD_CLASSES',
      ],
    },
    { name: 'an unknown SWITCHYARD_ env name is fatal', env: { SWITCHYARD_PROT: '1' }, mentions: ['SWITCHYARD_PROT'] },
    {
      // kubelet's variables for a Service named switchyard-… in the pod's namespace.
      name: 'a Kubernetes service variable says where it comes from and what to do',
      env: { SWITCHYARD_GATEWAY_SERVICE_HOST: '10.96.0.10' },
      mentions: ['SWITCHYARD_GATEWAY_SERVICE_HOST', 'Kubernetes', 'enableServiceLinks: false'],
    },
    {
      name: "a Kubernetes service's port variable says so too",
      env: { SWITCHYARD_SCHEDULER_PORT: 'tcp://10.96.0.10:7070' },
      mentions: ['SWITCHYARD_SCHEDULER_PORT', 'enableServiceLinks: false'],
    },
    {
      name: "the CLI's API token variable says whose it is",
      env: { SWITCHYARD_API_TOKEN: 'api-token-0123456789' },
      mentions: ['SWITCHYARD_API_TOKEN', 'switchyard CLI', 'unset it'],
    },
    { name: 'an unknown flag is fatal', argv: ['--prot', '1'], mentions: ['--prot'] },
    { name: 'a positional argument is fatal', argv: ['serve'], mentions: ["'serve'"] },
    { name: 'a non-number is refused', env: { SWITCHYARD_PORT: 'abc' }, mentions: ['SWITCHYARD_PORT', "'abc'"] },
    { name: 'a non-boolean is refused', argv: ['--verbose=maybe'], mentions: ['--verbose', 'maybe'] },
    {
      name: 'an enum outside its choices is refused',
      env: { SWITCHYARD_MODE: 'etcd' },
      mentions: ['memory, kubernetes'],
    },
    { name: 'a record that is not JSON is refused', argv: ['--classes', 'x'], mentions: ['JSON object'] },
    {
      name: 'a schema violation names its source',
      argv: ['--classes', '{"x":{"engine":"c"}}'],
      mentions: ['classes.x.engine', 'from --classes'],
    },
    { name: 'a missing file is fatal', argv: ['--config', 'missing.yaml'], mentions: ['missing.yaml'] },
    { name: 'a file that is not a mapping is fatal', argv: ['--config', 'list.yaml'], mentions: ['mapping'] },
    { name: 'a file that is not YAML is fatal', argv: ['--config', 'broken.yaml'], mentions: ['broken.yaml'] },
    {
      name: 'every problem is reported at once',
      argv: ['--prot', '1'],
      env: { SWITCHYARD_NAMEE: 'x' },
      mentions: ['--prot', 'SWITCHYARD_NAMEE'],
    },
    {
      name: 'an unknown key does not hide an invalid value',
      argv: ['--prot', '1', '--classes', '{"x":{"engine":"c"}}'],
      mentions: ['--prot', 'classes.x.engine'],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      assert.throws(
        () => load(c.argv ?? [], c.env),
        (error: unknown) => {
          assert.ok(error instanceof ConfigError, String(error));
          assert.equal(error.code, 'invalid_request');
          for (const m of c.mentions) assert.ok(error.message.includes(m), `${m} in ${error.message}`);
          assert.ok(error.message.split('\n').length >= 2, 'multi-line message');
          return true;
        },
      );
    });
  }
});

// A map in an env var or a flag is JSON typed by hand, where a trailing
// comma or a missing quote is the usual mistake; it often holds secrets
// (a class's env or headers), which the message must not repeat.
describe('a map in env or a flag that is not a JSON object', () => {
  function problem(argv: string[], env: Record<string, string> = {}): string {
    try {
      load(argv, env);
    } catch (error) {
      assert.ok(error instanceof ConfigError, String(error));
      return error.message;
    }
    assert.fail('the config was taken');
  }

  it('says a syntax error is one, and where', () => {
    const message = problem(['--classes', '{"x":{"engine":"a",}}']);
    assert.match(message, /--classes: not valid JSON .*line 1 column 20/);
  });

  it('says where a syntax error is without repeating the text, which may hold a secret', () => {
    const message = problem([], { SWITCHYARD_CLASSES: '{"x":{"engine":"a","headers":{"k": s3cret}}}' });
    assert.match(message, /SWITCHYARD_CLASSES: not valid JSON/);
    assert.doesNotMatch(message, /s3cret/);
  });

  it('says what a JSON value that is no object is', () => {
    assert.match(problem(['--classes', '["x"]']), /--classes: expects a JSON object, not an array/);
  });
});

describe('a required key nothing sets', () => {
  const needs = z.object({
    schedulerUrl: z.string().describe('Where to dial.'),
    election: z.object({ leaseName: z.string().describe('Lease.') }).describe('Election.'),
  });
  it('is named as required, with the flag, env name and file key that set it', () => {
    assert.throws(
      () => loadConfig(needs, { argv: ['--election.lease-name', 'l'], env: {} }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError, String(error));
        assert.equal(
          error.message,
          'invalid configuration:\n' +
            "  - schedulerUrl: required; set it with --scheduler-url, SWITCHYARD_SCHEDULER_URL or 'schedulerUrl' in the config file",
        );
        return true;
      },
    );
  });
});

class Exited extends Error {}
const exitStub = ((code: number) => {
  throw new Exited(String(code));
}) as (code: number) => never;

function run(argv: string[], env: Record<string, string> = {}): { text: string; code: string } {
  let text = '';
  try {
    load(argv, env, { print: (t) => (text += t), exit: exitStub });
  } catch (error) {
    if (error instanceof Exited) return { text, code: error.message };
    throw error;
  }
  return { text, code: 'none' };
}

describe('--print-config and --help', () => {
  it('prints the effective config with every secret redacted and exits 0', () => {
    const { text, code } = run(
      ['--print-config', '--token', 's3cret-token', '--classes', '{"x":{"engine":"a","headers":{"k":"hdr-secret"}}}'],
      { SWITCHYARD_TOKENS: 'tok-one,tok-two', SWITCHYARD_PORT: '9' },
    );
    assert.equal(code, '0');
    for (const secret of ['s3cret-token', 'tok-one', 'tok-two', 'hdr-secret'])
      assert.ok(!text.includes(secret), secret);
    const printed = parseYaml(text) as Record<string, unknown>;
    assert.equal(printed.port, 9);
    assert.equal(printed.token, REDACTED);
    assert.deepEqual(printed.tokens, [REDACTED, REDACTED]);
    assert.deepEqual(printed.classes, { x: { engine: 'a', headers: REDACTED } });
  });
  it('prints a URL with its user info and query values redacted, names and the rest kept', () => {
    const urls = z.object({
      url: httpUrl().optional().describe('A URL.'),
      urls: z.array(httpUrl()).default([]).describe('URLs.'),
      classes: z
        .record(z.string(), z.object({ url: httpUrl().optional() }))
        .default({})
        .describe('Classes.'),
    });
    const printed = redactConfig(urls, {
      url: 'https://alice:pa55word@mcp.example.com:8443/v1/mcp?api_key=k3y-secret&region=eu#frag',
      urls: ['http://scheduler:7070', 'https://token-secret@relay.example.com/'],
      classes: { remote: { url: 'https://mcp.example.com/mcp?key=q-secret' } },
    });
    assert.deepEqual(printed, {
      url: `https://${REDACTED}@mcp.example.com:8443/v1/mcp?api_key=${REDACTED}&region=${REDACTED}#frag`,
      urls: ['http://scheduler:7070', `https://${REDACTED}@relay.example.com/`],
      classes: { remote: { url: `https://mcp.example.com/mcp?key=${REDACTED}` } },
    });
  });
  it('prints every option with its default and env name and exits 0', () => {
    const { text, code } = run(['--help']);
    assert.equal(code, '0');
    for (const field of configFields(schema)) {
      assert.ok(text.includes(field.flag), field.flag);
      assert.ok(text.includes(field.envName), field.envName);
    }
    assert.ok(text.includes('default: "lease"'));
  });
  it('still refuses an invalid config when asked to print it', () => {
    assert.throws(() => run(['--print-config', '--port', 'x']), ConfigError);
  });
});

describe('schemas the loader refuses', () => {
  const cases = [
    { name: 'a field without a description', schema: z.object({ a: z.string() }), mentions: 'describe' },
    {
      name: 'a union field',
      schema: z.object({ a: z.union([z.string(), z.number()]).describe('x') }),
      mentions: 'unsupported',
    },
    {
      name: 'an array of objects',
      schema: z.object({ a: z.array(z.object({ b: z.string() })).describe('x') }),
      mentions: 'arrays',
    },
  ];
  for (const c of cases) {
    it(`refuses ${c.name}`, () => {
      assert.throws(
        () => configFields(c.schema),
        (e: unknown) => e instanceof ConfigError && e.message.includes(c.mentions),
      );
    });
  }
});

describe('reference rendering', () => {
  it('renders a Markdown row per option with env, flag, default and secrecy', () => {
    const md = markdownReference(configFields(schema));
    assert.ok(
      md.includes(
        '| `election.leaseName` | `SWITCHYARD_ELECTION_LEASE_NAME` | `--election.lease-name` | string | `"lease"` |',
      ),
    );
    assert.match(md, /`token`.*Secret/);
    assert.equal(md.trim().split('\n').length, 2 + configFields(schema).length);
  });
  it('renders settings inside a map option without env and flag columns, lists and maps as written in YAML', () => {
    const md = markdownReference(configFields(schema), { sources: false });
    assert.ok(md.startsWith('| key | type | default | description |\n'));
    assert.ok(md.includes('| `peers` | string[] | `[]` | Peer URLs. |'), md);
    assert.doesNotMatch(md, /SWITCHYARD_|--election|comma-separated|JSON in env/);
  });
  it('keeps the values of a list of enum values inside their Markdown cell, and plain in --help', () => {
    const fields = configFields(
      z.object({
        algs: z
          .array(z.enum(['RS256', 'ES256']))
          .default([])
          .describe('x'),
      }),
    );
    const row = markdownReference(fields).trim().split('\n')[2]!;
    // Six cells: every `|` of the type is escaped.
    assert.equal(row.split(/(?<!\\)\|/).length, 8, row);
    assert.match(row, /\| \(RS256 \\\| ES256\)\[\] \(comma-separated\) \|/);
    assert.match(helpText('x', fields), /--algs <\(RS256 \| ES256\)\[\] \(comma-separated\)>/);
  });
  it('appends the defaults note to the help text', () => {
    assert.ok(helpText('x', configFields(schema), 'NOTE here').endsWith('NOTE here\n'));
  });
});

describe('config files on disk', () => {
  let dir = '';
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-config-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));
  it('reads a real YAML file through the default reader', () => {
    const path = join(dir, 'c.yaml');
    writeFileSync(path, 'election:\n  leaseDurationMs: 20000\n');
    const config = loadConfig(schema, { argv: ['--config', path], env: {} });
    assert.equal(config.election.leaseDurationMs, 20000);
  });
});

describe('the YAML library', () => {
  let dir = '';
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-config-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  // A fresh process each: whether the library is in the module cache after loading a config.
  const yamlLoadedAfter = (argv: string[]): boolean => {
    const script = `
      import { createRequire } from 'node:module';
      import { z } from 'zod';
      import { loadConfig } from '@switchyard/service';
      loadConfig(z.object({ port: z.number().default(1).describe('A port.') }), { argv: ${JSON.stringify(argv)}, env: {} });
      const cached = Object.keys(createRequire(import.meta.url).cache);
      console.log(cached.some((path) => path.includes('/node_modules/yaml/')));`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    return JSON.parse(out) as boolean;
  };

  // It costs a process about 2 MB of RSS, and most are configured by flags and environment alone.
  it('is not loaded by a process given no config file', () => {
    assert.equal(yamlLoadedAfter(['--port', '2']), false);
  });

  it('is loaded to read a config file', () => {
    const path = join(dir, 'c.yaml');
    writeFileSync(path, 'port: 3\n');
    assert.equal(yamlLoadedAfter(['--config', path]), true);
  });
});

describe('loadAppConfig', () => {
  const app = (argv: string[], derive?: (c: z.output<typeof schema>) => z.output<typeof schema>) => {
    let reported = '';
    try {
      const config = loadAppConfig(schema, {
        argv,
        env: {},
        program: 'switchyard-test',
        report: (t) => (reported += t),
        exit: exitStub,
        ...(derive ? { derive } : {}),
      });
      return { config, reported, code: 'none' };
    } catch (error) {
      if (error instanceof Exited) return { reported, code: error.message };
      throw error;
    }
  };

  it('reports every problem under the program name, without a stack, and exits 2', () => {
    const { reported, code } = app(['--bogus', '1', '--port', 'x']);
    assert.equal(code, '2');
    assert.match(reported, /^switchyard-test: invalid configuration:\n/);
    assert.match(reported, /^ {2}- unknown flag --bogus$/m);
    assert.doesNotMatch(reported, /\bat \S+ \(/, 'no stack frames');
  });

  it('reports a ConfigError thrown by derive the same way', () => {
    const { reported, code } = app([], () => {
      throw new ConfigError('invalid configuration', ['name: needs a peer']);
    });
    assert.equal(code, '2');
    assert.equal(reported, 'switchyard-test: invalid configuration:\n  - name: needs a peer\n');
  });

  it('returns a valid config and lets other errors through', () => {
    assert.equal(app(['--port', '8080']).config?.port, 8080);
    assert.throws(
      () =>
        app([], () => {
          throw new TypeError('a bug');
        }),
      TypeError,
    );
  });
});
