// Removing a token ends what it let in: the list is looked at once a
// check interval while anything is held, holders it no longer admits are
// ended once (a new holder is asked at its first check, whatever the list),
// and an empty list (a Secret being replaced) ends nothing.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '@switchyard/clock/testing';
import { REVOCATION_CHECK_MS, watchTokenRevocations } from '@switchyard/service';

function setup(initial: readonly string[]) {
  const clock = new ManualClock();
  let tokens = initial;
  let reads = 0;
  const sweeps: number[] = [];
  const revocations = watchTokenRevocations({
    tokens: () => (reads++, tokens),
    clock,
    onRevoked: (ended) => sweeps.push(ended),
  });
  const ended: string[] = [];
  const hold = (token: string) =>
    revocations.hold(
      () => tokens.includes(token),
      () => ended.push(token),
    );
  return {
    clock,
    revocations,
    ended,
    sweeps,
    hold,
    setTokens: (next: readonly string[]) => void (tokens = next),
    reads: () => reads,
  };
}

describe('watchTokenRevocations', () => {
  it('ends, within one check, each holder whose token was removed, and only those', async () => {
    const t = setup(['old', 'new']);
    t.hold('old');
    t.hold('new');
    t.hold('old');
    t.setTokens(['new']);
    await t.clock.advance(REVOCATION_CHECK_MS - 1);
    assert.deepEqual(t.ended, [], 'not before the check');
    await t.clock.advance(1);
    assert.deepEqual(t.ended, ['old', 'old']);
    assert.equal(t.revocations.held, 1);
    t.setTokens(['newer']);
    await t.clock.advance(REVOCATION_CHECK_MS);
    assert.deepEqual(t.ended, ['old', 'old', 'new'], 'each ended once');
    assert.deepEqual(t.sweeps, [2, 1], 'one report per check that ended any');
    assert.equal(t.revocations.held, 0);
  });

  it('looks at the list only while something is held, and forgets released holders', async () => {
    const t = setup(['a']);
    const readsAtStart = t.reads();
    await t.clock.advance(REVOCATION_CHECK_MS * 5);
    assert.equal(t.reads(), readsAtStart, 'nothing held: no timer');
    const release = t.hold('a');
    await t.clock.advance(REVOCATION_CHECK_MS * 3);
    assert.equal(t.reads(), readsAtStart + 3, 'one look per interval');
    release();
    t.setTokens(['b']);
    await t.clock.advance(REVOCATION_CHECK_MS * 3);
    assert.deepEqual(t.ended, [], 'a released holder is not ended');
    assert.equal(t.reads(), readsAtStart + 4, 'the watch stops once nothing is held');
  });

  it('ends nothing on an empty list, and checks the next non-empty one', async () => {
    const t = setup(['a', 'b']);
    t.hold('a');
    t.hold('b');
    t.setTokens([]);
    await t.clock.advance(REVOCATION_CHECK_MS * 2);
    assert.deepEqual(t.ended, []);
    t.setTokens(['b']);
    await t.clock.advance(REVOCATION_CHECK_MS);
    assert.deepEqual(t.ended, ['a']);
  });

  it('ends a holder held only after the check that saw its token removed', async () => {
    // Admission and hold are apart (a stream is held once its upstream answers): the
    // list can change, and be checked for the holders already there, in between.
    const t = setup(['a', 'late']);
    t.hold('a');
    t.setTokens(['a']);
    await t.clock.advance(REVOCATION_CHECK_MS);
    t.hold('late');
    await t.clock.advance(REVOCATION_CHECK_MS);
    assert.deepEqual(t.ended, ['late']);
  });

  it('asks a holder once, then not while the list keeps its identity, and nothing after close', async () => {
    const t = setup(['a']);
    let asked = 0;
    t.revocations.hold(
      () => (asked++, true),
      () => t.ended.push('x'),
    );
    await t.clock.advance(REVOCATION_CHECK_MS * 3);
    assert.equal(asked, 1, 'asked at its first check only: the same list object');
    t.revocations.close();
    t.setTokens(['b']);
    await t.clock.advance(REVOCATION_CHECK_MS * 3);
    assert.deepEqual(t.ended, []);
  });
});
