import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  ERROR_CODES,
  SwitchyardError,
  isIdentityValue,
  jsonRpcError,
  parseWith,
  runtimeInfoSchema,
  scheduleRequestSchema,
  statusOf,
  syncMessageSchema,
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
});

describe('error registry', () => {
  const table: Array<[keyof typeof ERROR_CODES, number, number]> = [
    ['parse_error', 400, -32700],
    ['invalid_request', 400, -32600],
    ['invalid_params', 400, -32602],
    ['bad_identity', 400, -32600],
    ['session_required', 400, -32000],
    ['unsupported_protocol_version', 400, -32000],
    ['unauthorized', 401, -32001],
    ['forbidden', 403, -32000],
    ['session_not_found', 404, -32001],
    ['runtime_not_found', 404, -32001],
    ['not_found', 404, -32601],
    ['method_not_allowed', 405, -32000],
    ['conflict', 409, -32000],
    ['body_too_large', 413, -32000],
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
  it('never blames the client for an unknown failure', () => {
    assert.equal(statusOf(new TypeError('boom')), 500);
    assert.equal(statusOf('string thrown'), 500);
  });
});
