// Token checks shared by the tunnel endpoint, epoch sync and runtimes'
// direct listeners: constant-time membership among the configured tokens.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { bearerMatches, tokenMatches } from '../src/admission.ts';

describe('tokenMatches', () => {
  it('admits each configured token and nothing else: not a prefix, an extension, or any token of an empty list', () => {
    const tokens = ['first-token-0123456789', 'second-token-0123456789'];
    for (const token of tokens) assert.equal(tokenMatches(token, tokens), true);
    for (const other of ['first-token-012345678', 'first-token-01234567890', '', 'second']) {
      assert.equal(tokenMatches(other, tokens), false, other);
    }
    assert.equal(tokenMatches('first-token-0123456789', []), false);
  });

  it('stays right while the configured tokens keep changing (its digests of them are bounded)', () => {
    for (let i = 0; i < 200; i++) {
      const tokens = [`rotated-${i}`];
      assert.equal(tokenMatches(`rotated-${i}`, tokens), true);
      assert.equal(tokenMatches(`rotated-${i - 1}`, tokens), false);
    }
  });
});

describe('bearerMatches', () => {
  it('takes only `Bearer <token>` (any case of the scheme, surrounding space allowed)', () => {
    const tokens = ['join-token-0123456789'];
    assert.equal(bearerMatches('Bearer join-token-0123456789', tokens), true);
    assert.equal(bearerMatches('bearer   join-token-0123456789 ', tokens), true);
    for (const value of [
      undefined,
      '',
      'Basic join-token-0123456789',
      'Bearer',
      'Bearer a b',
      'join-token-0123456789',
    ]) {
      assert.equal(bearerMatches(value, tokens), false, String(value));
    }
  });
});
