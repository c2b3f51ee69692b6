import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  ERROR_CODES,
  SwitchyardError,
  TERM_MAX,
  EPOCH_MAX,
  isIdentityValue,
  jsonRpcError,
  parseWith,
  runtimeInfoSchema,
  runtimeStateSchema,
  scheduleRequestSchema,
  snapshotSchema,
  statusOf,
  syncMessageSchema,
  syncFrameSchema,
  SYNC_PART_LIMITS,
  WATCH_LIMITS,
  watchDeltaSchema,
  watchSnapshotPartSchema,
  watchSnapshotSchema,
} from '@switchyard/protocol';

describe('identity values', () => {
  const cases: Array<[string, unknown, boolean]> = [
    ['accepts the whole allowed alphabet', 'Ab0._:@-z', true],
    ['accepts 128 characters', 'a'.repeat(128), true],
    ['rejects 129 characters', 'a'.repeat(129), false],
    ['rejects the empty string', '', false],
    ['rejects spaces', 'a b', false],
    ['rejects slashes', 'a/b', false],
    ['rejects non-ASCII', 'café', false],
    ['rejects control characters', 'a\nb', false],
    ['rejects non-strings', 42, false],
  ];
  for (const [name, value, expected] of cases) {
    it(name, () => assert.equal(isIdentityValue(value), expected));
  }
});

describe('schemas name the offending field', () => {
  it('names a bad process id in a schedule request', () => {
    const parsed = parseWith(scheduleRequestSchema, { class: 'demo', processId: 'no spaces' });
    assert.equal(parsed.ok, false);
    assert.match(!parsed.ok ? parsed.error : '', /^processId: /);
  });
  it('names unknown fields', () => {
    const parsed = parseWith(scheduleRequestSchema, { class: 'demo', processId: 'p', bogus: 1 });
    assert.equal(parsed.ok, false);
    assert.match(!parsed.ok ? parsed.error : '', /bogus/);
  });
  it('names an oversized nested field', () => {
    const parsed = parseWith(runtimeInfoSchema, { id: 'r1', classes: ['demo'], metadata: { zone: 'x'.repeat(300) } });
    assert.equal(parsed.ok, false);
    assert.match(!parsed.ok ? parsed.error : '', /^metadata\.zone: /);
  });
  it('requires a value for equal rules', () => {
    const parsed = parseWith(scheduleRequestSchema, {
      class: 'demo',
      processId: 'p',
      affinity: [{ key: 'zone', op: 'equal' }],
    });
    assert.equal(parsed.ok, false);
    assert.match(!parsed.ok ? parsed.error : '', /affinity\[0\]\.value/);
  });
  it('fills defaults of a schedule request', () => {
    const parsed = parseWith(scheduleRequestSchema, { class: 'demo', processId: 'p' });
    assert.deepEqual(parsed.ok && parsed.value, { class: 'demo', processId: 'p', sticky: true });
  });
  it('rejects a sync message of unknown type', () => {
    const parsed = parseWith(syncMessageSchema, { type: 'elect', term: 1, epoch: 1 });
    assert.equal(parsed.ok, false);
    assert.match(!parsed.ok ? parsed.error : '', /^type: /);
  });
  it('rejects a negative term', () => {
    const parsed = parseWith(syncMessageSchema, { type: 'announce', term: -1, epoch: 1 });
    assert.equal(parsed.ok, false);
    assert.match(!parsed.ok ? parsed.error : '', /^term: /);
  });
  it('rejects a term past what a Lease stores (int32), in messages and snapshots alike', () => {
    assert.equal(TERM_MAX, 2 ** 31 - 1);
    const ok = parseWith(syncMessageSchema, { type: 'error', term: TERM_MAX, epoch: 1, reason: 'fenced' });
    assert.equal(ok.ok, true);
    const error = parseWith(syncMessageSchema, { type: 'error', term: TERM_MAX + 1, epoch: 1, reason: 'fenced' });
    assert.match(!error.ok ? error.error : '', /^term: /);
    const snapshot = parseWith(snapshotSchema, { epoch: 1, term: TERM_MAX + 1, runtimes: [] });
    assert.match(!snapshot.ok ? snapshot.error : '', /^term: /);
  });
  it('takes a run of parts only as sync frames, never as a whole sync message', () => {
    const part = { type: 'part', term: 1, epoch: 2, part: 0, runtimes: [] as unknown[] };
    const end = { type: 'commit-end', term: 1, epoch: 2, parts: 1 };
    assert.equal(parseWith(syncFrameSchema, part).ok, false, 'a part of no runtime');
    assert.equal(parseWith(syncFrameSchema, end).ok, true);
    assert.equal(parseWith(syncMessageSchema, end).ok, false);
    assert.equal(parseWith(syncFrameSchema, { ...end, parts: 0 }).ok, false);
    assert.equal(parseWith(syncFrameSchema, { ...end, parts: SYNC_PART_LIMITS.partsMax + 1 }).ok, false);
    assert.ok(Number.isSafeInteger(SYNC_PART_LIMITS.partsMax));
    const collectEnd = { type: 'collect-end', term: 1, epoch: 2, replica: 's1', version: 3, parts: 2 };
    assert.equal(parseWith(syncFrameSchema, collectEnd).ok, true);
    assert.equal(parseWith(syncFrameSchema, { type: 'announce', term: 1, epoch: 2 }).ok, true);
  });
  it('rejects a latest epoch past EPOCH_MAX, which would leave a leader epoch numbers that cannot rise', () => {
    const error = { type: 'error', term: 1, epoch: 1, reason: 'fenced' };
    assert.equal(parseWith(syncMessageSchema, { ...error, latestEpoch: EPOCH_MAX }).ok, true);
    for (const latestEpoch of [EPOCH_MAX + 1, Number.MAX_SAFE_INTEGER]) {
      const parsed = parseWith(syncMessageSchema, { ...error, latestEpoch });
      assert.match(!parsed.ok ? parsed.error : '', /^latestEpoch: /);
    }
  });
});

// latest_version rules rank runtimes by their version and skip one whose
// version they cannot parse; a runtime declaring such a version joined and
// was then left out of every such rule without a word.
describe('a /watch snapshot part', () => {
  const MAX = WATCH_LIMITS.snapshotPartEntriesMax;
  const ids = (n: number): string[] => Array.from({ length: n }, (_, i) => `p${i}`);
  const refs = (n: number) => ids(n).map((process) => ({ process, thread: 't' }));
  const cases: Array<[string, number, number, boolean]> = [
    ['takes processes only', MAX, 0, true],
    ['takes threads only', 0, MAX, true],
    ['takes both up to the limit together', MAX / 2, MAX / 2, true],
    ['refuses both past the limit together', MAX / 2, MAX / 2 + 1, false],
    ['refuses one list past the limit', MAX + 1, 0, false],
    ['refuses a part of no entry', 0, 0, false],
  ];
  for (const [name, processes, threads, ok] of cases) {
    it(name, () => {
      const parsed = parseWith(watchSnapshotPartSchema, { part: 0, processes: ids(processes), threads: refs(threads) });
      assert.equal(parsed.ok, ok, parsed.ok ? '' : parsed.error);
    });
  }
  it('takes at most about 2.8 M characters, under a tenth of an event', () => {
    const longest = 'x'.repeat(128);
    const part = { part: WATCH_LIMITS.snapshotPartsMax - 1, processes: [], threads: [] as object[] };
    part.threads = Array.from({ length: MAX }, () => ({ process: longest, thread: longest }));
    assert.equal(parseWith(watchSnapshotPartSchema, part).ok, true);
    const chars = JSON.stringify(part).length;
    assert.ok(chars < 2.9e6 && chars < WATCH_LIMITS.eventCharsMax / 10, `${chars} characters`);
  });
});

describe("a joining runtime's version", () => {
  const join = (version: unknown) => parseWith(runtimeInfoSchema, { id: 'r1', classes: ['demo'], version });
  const ranked = ['0.0.0', '1.4.2', 'v1.4.2', '2.0.0-rc.1', '2.0.0-rc.1+build.7'];
  for (const version of ranked) {
    it(`takes ${version}, which latest_version ranks`, () => assert.equal(join(version).ok, true));
  }
  const unranked = ['banana', 'latest', '1.4', '01.4.2', '1.4.2.0', 'git-3f2c1a9', ''];
  for (const version of unranked) {
    it(`refuses ${JSON.stringify(version)}, naming the field and the rule`, () => {
      const parsed = join(version);
      assert.match(!parsed.ok ? parsed.error : 'accepted', /^version: must be a semantic version such as 1\.4\.2/);
    });
  }
  it('still takes a runtime that declares no version, as 0.0.0', () => {
    const parsed = parseWith(runtimeInfoSchema, { id: 'r1', classes: ['demo'] });
    assert.equal(parsed.ok && parsed.value.version, '0.0.0');
  });
});

// Every process that speaks the protocol loads it, the gateway too, which
// never checks a version: semver's whole API is 47 modules, its parser (all
// the check needs) 7; see docs/benchmarks.md for what that is in memory.
describe('loading @switchyard/protocol', () => {
  it("loads semver's parser, not its whole API", () => {
    // A fresh process: which of semver's files are in the module cache once the protocol is loaded.
    const script = `
      import { createRequire } from 'node:module';
      await import('@switchyard/protocol');
      const cached = Object.keys(createRequire(import.meta.url).cache);
      console.log(JSON.stringify(cached.filter((path) => path.includes('/node_modules/semver/'))));`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    const loaded = JSON.parse(out) as string[];
    assert.ok(
      loaded.some((path) => path.endsWith('/semver/functions/parse.js')),
      'the parser is loaded',
    );
    assert.deepEqual(
      loaded.filter((path) => path.endsWith('/semver/index.js') || path.includes('/semver/ranges/')),
      [],
    );
  });
});

describe('long lists of bad elements', () => {
  // zod records an issue for every bad element: 1,000,000 bad thread refs (29 MB of JSON, less than
  // a /watch event may carry) cost 1.6 GB and 8 s to refuse, against 125 MB and 0.7 s to accept as
  // many good ones. A runtime or replica could take a scheduler down with one event; the first
  // bad element is reason enough to refuse.
  const COUNT = 50_000;
  const bad = <T>(make: () => T): T[] => Array.from({ length: COUNT }, make);
  const runtime = {
    id: 'r1',
    classes: ['demo'],
    metadata: {},
    version: '1',
    idleWeight: {},
    available: true,
    owner: 's0',
    generation: 1,
  };
  const cases: Array<{ name: string; schema: Parameters<typeof parseWith>[0]; input: unknown; path: RegExp }> = [
    {
      name: "a /watch snapshot's processes",
      schema: watchSnapshotSchema,
      input: { processes: bad(() => 'a b'), threads: [], idleWeight: {}, metadata: {} },
      path: /^processes\[0\]: /,
    },
    {
      name: "a /watch snapshot's threads",
      schema: watchSnapshotSchema,
      input: { processes: [], threads: bad(() => ({ process: '!', thread: '!' })), idleWeight: {}, metadata: {} },
      path: /^threads\[0\]\.process: /,
    },
    {
      name: "a /watch delta's ops",
      schema: watchDeltaSchema,
      input: { ops: bad(() => ({ op: 'nope' })) },
      path: /^ops\[0\]/,
    },
    {
      name: "a runtime state's threads",
      schema: runtimeStateSchema,
      input: { runtime, processes: [], threads: bad(() => ({ process: 'p', thread: 't', extra: 1 })) },
      path: /^threads\[0\]/,
    },
    {
      name: "an epoch snapshot's runtimes",
      schema: snapshotSchema,
      input: { epoch: 1, term: 1, runtimes: bad(() => ({ runtime: {}, processes: [], threads: [] })) },
      path: /^runtimes\[0\]\.runtime/,
    },
    {
      name: "a follower's part of ops",
      schema: syncMessageSchema,
      input: {
        ...{ type: 'collect', term: 1, epoch: 1, replica: 's1', version: 1 },
        part: { kind: 'delta', base: 0, ops: bad(() => ({ op: 'process.add', runtimeId: '!', process: '!' })) },
      },
      path: /^part\.ops\[0\]/,
    },
    {
      name: "a commit's ops",
      schema: syncMessageSchema,
      input: {
        ...{ type: 'commit', term: 1, epoch: 1 },
        body: { kind: 'delta', baseEpoch: 0, ops: bad(() => ({ op: 'runtime.remove', runtimeId: '' })) },
      },
      path: /^body\.ops\[0\]/,
    },
  ];
  for (const c of cases) {
    it(`in ${c.name} are refused at the first, with one issue`, () => {
      const result = c.schema.safeParse(c.input);
      assert.equal(result.success, false);
      assert.equal(result.error!.issues.length, 1, `${result.error!.issues.length} issues`);
      const parsed = parseWith(c.schema, c.input);
      assert.match(!parsed.ok ? parsed.error : '', c.path);
    });
  }

  const badKeys = (value: unknown): Record<string, unknown> =>
    Object.fromEntries(Array.from({ length: COUNT }, (_, i) => [`bad key ${i}`, value]));
  const maps: Array<{ name: string; schema: Parameters<typeof parseWith>[0]; input: unknown; path: RegExp }> = [
    {
      name: "a /watch delta's metadata op",
      schema: watchDeltaSchema,
      input: { ops: [{ op: 'metadata', metadata: badKeys('x') }] },
      path: /^ops\[0\]\.metadata: at most 64 entries$/,
    },
    {
      name: "a /watch snapshot's idle weight",
      schema: watchSnapshotSchema,
      input: { processes: [], threads: [], idleWeight: badKeys(-1), metadata: {} },
      path: /^idleWeight: at most 16 dimensions$/,
    },
  ];
  for (const c of maps) {
    it(`in ${c.name}, a map of many bad keys is refused by its size, with one issue`, () => {
      const result = c.schema.safeParse(c.input);
      assert.equal(result.success, false);
      assert.equal(result.error!.issues.length, 1, `${result.error!.issues.length} issues`);
      const parsed = parseWith(c.schema, c.input);
      assert.match(!parsed.ok ? parsed.error : '', c.path);
    });
  }

  it('maps name their first bad key or value', () => {
    const cases: Array<[unknown, RegExp]> = [
      [{ zone: 'eu', 'a b': 'x' }, /^metadata\.a b: must be 1-63 characters/],
      [{ zone: 'x'.repeat(257) }, /^metadata\.zone: at most 256 characters$/],
      [{ zone: 1 }, /^metadata\.zone: expected a string$/],
      [JSON.parse('{"__proto__": "x"}'), /^metadata\.__proto__: '__proto__' cannot be a key: JavaScript objects/],
      ['zone=eu', /^metadata: expected an object$/],
    ];
    for (const [metadata, error] of cases) {
      const parsed = parseWith(runtimeInfoSchema, { id: 'r1', classes: ['demo'], metadata });
      assert.match(!parsed.ok ? parsed.error : 'accepted', error, JSON.stringify(metadata));
    }
    const weight = parseWith(watchSnapshotSchema, {
      ...{ processes: [], threads: [], metadata: {} },
      idleWeight: { sandboxes: 1e13 },
    });
    assert.match(
      !weight.ok ? weight.error : 'accepted',
      /^idleWeight\.sandboxes: must be between 0 and 1000000000000$/,
    );
  });

  it('leave good lists as they were', () => {
    const snapshot = {
      processes: ['a', 'b'],
      threads: [{ process: 'a', thread: 't' }],
      idleWeight: { sandboxes: 1 },
      metadata: { zone: 'z' },
    };
    assert.deepEqual(parseWith(watchSnapshotSchema, snapshot), { ok: true, value: snapshot });
    const tooMany = parseWith(watchDeltaSchema, { ops: Array.from({ length: 100_001 }, () => ({ op: 'x' })) });
    assert.match(!tooMany.ok ? tooMany.error : '', /^ops: Too big/);
  });
});

describe('error registry', () => {
  const table: Array<[keyof typeof ERROR_CODES, number, number]> = [
    ['parse_error', 400, -32700],
    ['invalid_request', 400, -32600],
    ['invalid_params', 400, -32602],
    ['bad_identity', 400, -32600],
    ['session_required', 400, -32000],
    ['unsupported_protocol_version', 400, -32022],
    ['unauthorized', 401, -32001],
    ['forbidden', 403, -32000],
    ['session_not_found', 404, -32001],
    ['runtime_not_found', 404, -32001],
    ['not_found', 404, -32601],
    ['method_not_allowed', 405, -32000],
    ['not_acceptable', 406, -32000],
    ['request_timeout', 408, -32000],
    ['conflict', 409, -32000],
    ['body_too_large', 413, -32000],
    ['unsupported_media_type', 415, -32000],
    ['too_many_requests', 429, -32000],
    ['header_too_large', 431, -32600],
    ['internal', 500, -32603],
    ['upstream_unavailable', 502, -32000],
    ['unschedulable', 503, -32000],
    ['capacity_exhausted', 503, -32000],
    ['not_ready', 503, -32000],
    ['upstream_timeout', 504, -32000],
  ];
  it('covers every code exactly once', () => {
    assert.deepEqual(table.map(([code]) => code).sort(), Object.keys(ERROR_CODES).sort());
  });
  for (const [code, status, rpc] of table) {
    it(`maps ${code} to HTTP ${status} and JSON-RPC ${rpc}`, () => {
      assert.equal(new SwitchyardError(code, 'x').status, status);
      assert.equal(jsonRpcError(code, 'x', 7).error.code, rpc);
    });
  }
  it('adds the supported and requested versions to an unsupported_protocol_version body only', () => {
    const versions = { supported: ['2026-07-28'], requested: '2099-01-01' };
    assert.deepEqual(jsonRpcError('unsupported_protocol_version', 'x', 7, versions).error.data, {
      reason: 'unsupported_protocol_version',
      ...versions,
    });
    assert.deepEqual(jsonRpcError('invalid_request', 'x', 7, versions).error.data, { reason: 'invalid_request' });
  });
  it('never blames the client for an unknown failure', () => {
    assert.equal(statusOf(new TypeError('boom')), 500);
    assert.equal(statusOf('string thrown'), 500);
  });
});
