// The starts of tool calls between rounds: tied by the requestState a round answered, per class, and bounded.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CALLS_BETWEEN_ROUNDS_MAX, RoundStarts } from '../src/round-starts.ts';

describe('RoundStarts', () => {
  it('gives a resumed call the start of its first round, once', () => {
    const rounds = new RoundStarts();
    rounds.pause('demo', 'state-1', 100);
    assert.equal(rounds.resume('demo', 'state-1'), 100);
    assert.equal(rounds.resume('demo', 'state-1'), undefined);
  });

  it('knows no start for a first round, another class or a state that is no string', () => {
    const rounds = new RoundStarts();
    rounds.pause('demo', 'state-1', 100);
    assert.equal(rounds.resume('demo', undefined), undefined);
    assert.equal(rounds.resume('other', 'state-1'), undefined);
    assert.equal(rounds.resume('demo', 'state-2'), undefined);
    assert.equal(rounds.resume('demo', 'state-1'), 100);
  });

  it(`forgets the oldest paused call past ${CALLS_BETWEEN_ROUNDS_MAX}`, () => {
    const rounds = new RoundStarts();
    for (let i = 0; i <= CALLS_BETWEEN_ROUNDS_MAX; i++) rounds.pause('demo', `state-${i}`, i);
    assert.equal(rounds.resume('demo', 'state-0'), undefined);
    assert.equal(rounds.resume('demo', 'state-1'), 1);
    assert.equal(rounds.resume('demo', `state-${CALLS_BETWEEN_ROUNDS_MAX}`), CALLS_BETWEEN_ROUNDS_MAX);
  });
});
