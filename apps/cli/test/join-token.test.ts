// The join tokens of `switchyard up` go on command lines (the replicas'
// `--join-tokens`, the printed `runtime join … --token`): none may read as
// an option. A base64url token started with `-` one time in 64.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { newJoinToken } from '../src/join-token.ts';

it('makes join tokens that never read as an option, of 48 characters', () => {
  const tokens = Array.from({ length: 2000 }, newJoinToken);
  for (const token of tokens) assert.match(token, /^[0-9a-f]{48}$/);
  assert.equal(new Set(tokens).size, tokens.length);
});
