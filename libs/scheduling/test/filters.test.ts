import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  REASONS,
  affinityFilter,
  availabilityFilter,
  deterministicSelector,
  excludeFilter,
  processSelectorFilter,
  processStickyFilter,
} from '@switchyard/scheduling';
import type { Candidate, Filter, FilterContext, Reason } from '@switchyard/scheduling';
import { DRAINING_METADATA_KEY } from '@switchyard/protocol';
import { candidates, context, ids, rule, runtime } from './fixtures.ts';

interface Case {
  readonly name: string;
  readonly filter: Filter;
  readonly input: Candidate[];
  readonly context: FilterContext;
  /** Surviving ids, or the reason the filter rejects with. */
  readonly expect: string[] | Reason;
}

const [a, b, c] = candidates(runtime('a'), runtime('b'), runtime('c'));
const saturated = candidates(runtime('s', { idleWeight: { sandboxes: 0, memory: 5 } }))[0]!;
const down = candidates(runtime('d', { available: false }))[0]!;
const noDims = candidates(runtime('n', { idleWeight: {} }))[0]!;
const v = (id: string, version: string, metadata: Record<string, string> = {}): Candidate =>
  candidates(runtime(id, { version, metadata }))[0]!;

const cases: Case[] = [
  // Exclude
  {
    name: 'exclude keeps everything when the request excludes nothing',
    filter: excludeFilter,
    input: [a!, b!],
    context: context(),
    expect: ['a', 'b'],
  },
  {
    name: 'exclude drops the listed runtimes',
    filter: excludeFilter,
    input: [a!, b!, c!],
    context: context({ exclude: ['b', 'zz'] }),
    expect: ['a', 'c'],
  },
  {
    name: 'exclude rejects when every candidate is excluded',
    filter: excludeFilter,
    input: [a!, b!],
    context: context({ exclude: ['a', 'b'] }),
    expect: REASONS.allExcluded,
  },
  {
    name: 'exclude rejects an empty candidate set',
    filter: excludeFilter,
    input: [],
    context: context(),
    expect: REASONS.noCandidates,
  },
  // ProcessSticky
  {
    name: 'sticky keeps only the holders of the process',
    filter: processStickyFilter,
    input: [a!, b!, c!],
    context: context({}, ['b']),
    expect: ['b'],
  },
  {
    name: 'sticky keeps everything when the process is held nowhere',
    filter: processStickyFilter,
    input: [a!, b!],
    context: context(),
    expect: ['a', 'b'],
  },
  {
    name: 'a non-sticky request ignores the holders',
    filter: processStickyFilter,
    input: [a!, b!],
    context: context({ sticky: false }, ['b']),
    expect: ['a', 'b'],
  },
  {
    name: 'sticky rejects when the holders are not candidates',
    filter: processStickyFilter,
    input: [a!, c!],
    context: context({}, ['b']),
    expect: REASONS.holdersNotCandidates,
  },
  {
    name: 'sticky rejects an empty candidate set',
    filter: processStickyFilter,
    input: [],
    context: context(),
    expect: REASONS.noCandidates,
  },
  // Availability
  {
    name: 'availability keeps available runtimes with idle weight',
    filter: availabilityFilter,
    input: [a!, b!],
    context: context(),
    expect: ['a', 'b'],
  },
  {
    name: 'availability drops unavailable and saturated runtimes',
    filter: availabilityFilter,
    input: [a!, down, saturated],
    context: context(),
    expect: ['a'],
  },
  {
    name: 'a saturated runtime that holds the process passes availability',
    filter: availabilityFilter,
    input: [a!, saturated],
    context: context({}, ['s']),
    expect: ['a', 's'],
  },
  {
    name: 'an unavailable holder still fails availability',
    filter: availabilityFilter,
    input: [down],
    context: context({}, ['d']),
    expect: REASONS.noneAvailable,
  },
  {
    name: 'a runtime without weight dimensions is open',
    filter: availabilityFilter,
    input: [noDims],
    context: context(),
    expect: ['n'],
  },
  {
    name: 'availability rejects when nothing can take work',
    filter: availabilityFilter,
    input: [down, saturated],
    context: context(),
    expect: REASONS.noneAvailable,
  },
  {
    name: 'availability rejects an empty candidate set',
    filter: availabilityFilter,
    input: [],
    context: context(),
    expect: REASONS.noCandidates,
  },
  // Affinity
  {
    name: 'affinity without rules keeps everything',
    filter: affinityFilter,
    input: [a!, b!],
    context: context(),
    expect: ['a', 'b'],
  },
  {
    name: 'equal keeps runtimes whose metadata matches',
    filter: affinityFilter,
    input: [v('x', '1.0.0', { zone: 'eu' }), v('y', '1.0.0', { zone: 'us' }), v('z', '1.0.0')],
    context: context({ affinity: [rule('zone', 'equal', 'eu')] }),
    expect: ['x'],
  },
  {
    name: 'not_equal keeps other values and missing keys',
    filter: affinityFilter,
    input: [v('x', '1.0.0', { zone: 'eu' }), v('y', '1.0.0', { zone: 'us' }), v('z', '1.0.0')],
    context: context({ affinity: [rule('zone', 'not_equal', 'eu')] }),
    expect: ['y', 'z'],
  },
  {
    name: 'exists keeps runtimes that carry the key',
    filter: affinityFilter,
    input: [v('x', '1.0.0', { gpu: '' }), v('y', '1.0.0')],
    context: context({ affinity: [rule('gpu', 'exists')] }),
    expect: ['x'],
  },
  {
    name: 'the version key compares Runtime.version, not metadata',
    filter: affinityFilter,
    input: [v('x', '2.0.0', { version: '1.0.0' }), v('y', '1.0.0', { version: '2.0.0' })],
    context: context({ affinity: [rule('version', 'equal', '2.0.0')] }),
    expect: ['x'],
  },
  {
    name: 'rules are AND-ed',
    filter: affinityFilter,
    input: [v('x', '1.0.0', { zone: 'eu', gpu: 'a' }), v('y', '1.0.0', { zone: 'eu' }), v('z', '1.0.0', { gpu: 'a' })],
    context: context({ affinity: [rule('zone', 'equal', 'eu'), rule('gpu', 'exists')] }),
    expect: ['x'],
  },
  {
    name: 'latest_version keeps every runtime at the highest version',
    filter: affinityFilter,
    input: [v('x', '1.2.0'), v('y', '1.10.0'), v('z', '1.10.0+build.7')],
    context: context({ affinity: [rule('version', 'latest_version')] }),
    expect: ['y', 'z'],
  },
  {
    name: 'latest_version ranks a prerelease below its release',
    filter: affinityFilter,
    input: [v('x', '2.0.0-rc.2'), v('y', '1.9.9'), v('z', '2.0.0-rc.10')],
    context: context({ affinity: [rule('version', 'latest_version')] }),
    expect: ['z'],
  },
  {
    name: 'latest_version prefers the release over its prereleases',
    filter: affinityFilter,
    input: [v('x', '2.0.0-rc.2'), v('y', '2.0.0')],
    context: context({ affinity: [rule('version', 'latest_version')] }),
    expect: ['y'],
  },
  {
    name: 'latest_version drops invalid versions even when they sort higher',
    filter: affinityFilter,
    input: [v('x', 'v9-final'), v('y', '1.0.0'), v('z', '99')],
    context: context({ affinity: [rule('version', 'latest_version')] }),
    expect: ['y'],
  },
  {
    name: 'latest_version works on a metadata key',
    filter: affinityFilter,
    input: [v('x', '1.0.0', { image: '3.1.0' }), v('y', '1.0.0', { image: '3.0.9' }), v('z', '1.0.0')],
    context: context({ affinity: [rule('image', 'latest_version')] }),
    expect: ['x'],
  },
  {
    name: 'latest_version applies after the other rules whatever the order',
    filter: affinityFilter,
    input: [v('x', '2.0.0', { zone: 'us' }), v('y', '1.0.0', { zone: 'eu' })],
    context: context({ affinity: [rule('version', 'latest_version'), rule('zone', 'equal', 'eu')] }),
    expect: ['y'],
  },
  {
    name: 'latest_version rejects when no version is valid',
    filter: affinityFilter,
    input: [v('x', 'latest'), v('y', '')],
    context: context({ affinity: [rule('version', 'latest_version')] }),
    expect: REASONS.affinityMismatch,
  },
  {
    name: 'affinity rejects when a rule matches nothing',
    filter: affinityFilter,
    input: [a!, b!],
    context: context({ affinity: [rule('zone', 'equal', 'eu')] }),
    expect: REASONS.affinityMismatch,
  },
  {
    name: 'affinity rejects an empty candidate set',
    filter: affinityFilter,
    input: [],
    context: context(),
    expect: REASONS.noCandidates,
  },
  // ProcessSelector
  {
    name: 'a selector without holders keeps everything',
    filter: processSelectorFilter,
    input: [a!, b!],
    context: context({ processSelector: [rule('zone', 'equal', 'eu')] }),
    expect: ['a', 'b'],
  },
  {
    name: 'a matching holder is kept',
    filter: processSelectorFilter,
    input: [v('x', '1.0.0', { zone: 'eu' }), b!],
    context: context({ processSelector: [rule('zone', 'equal', 'eu')] }, ['x']),
    expect: ['x', 'b'],
  },
  {
    name: 'a non-matching holder is dropped, non-holders stay',
    filter: processSelectorFilter,
    input: [v('x', '1.0.0', { zone: 'us' }), b!],
    context: context({ processSelector: [rule('zone', 'equal', 'eu')] }, ['x']),
    expect: ['b'],
  },
  {
    name: 'selector latest_version keeps the newest holder',
    filter: processSelectorFilter,
    input: [v('x', '1.0.0'), v('y', '1.1.0'), c!],
    context: context({ processSelector: [rule('version', 'latest_version')] }, ['x', 'y']),
    expect: ['y', 'c'],
  },
  {
    name: 'selector mismatch rejects when only non-matching holders remain',
    filter: processSelectorFilter,
    input: [v('x', '1.0.0', { zone: 'us' })],
    context: context({ processSelector: [rule('zone', 'equal', 'eu')] }, ['x']),
    expect: REASONS.selectorMismatch,
  },
  {
    name: 'the selector rejects an empty candidate set',
    filter: processSelectorFilter,
    input: [],
    context: context(),
    expect: REASONS.noCandidates,
  },
];

describe('filters', () => {
  for (const t of cases) {
    it(t.name, () => {
      const status = t.filter.filter(t.input, t.context);
      if (typeof t.expect === 'string') {
        assert.equal(status.ok, false, `expected ${t.expect}, got ${JSON.stringify(status)}`);
        if (!status.ok) {
          assert.equal(status.code, t.expect);
          assert.match(status.message, new RegExp(`^${t.filter.stage}: `), 'the message names the stage');
        }
      } else {
        assert.equal(status.ok, true, JSON.stringify(status));
        if (status.ok) assert.deepEqual(ids(status.candidates), t.expect);
      }
    });
  }
});

interface SelectCase {
  readonly name: string;
  readonly input: Candidate[];
  readonly context: FilterContext;
  readonly expect: string;
}

const w = (id: string, idleWeight: Record<string, number>): Candidate => candidates(runtime(id, { idleWeight }))[0]!;
const hashOnly = { chooseWeightBy: '' };

const selectCases: SelectCase[] = [
  {
    name: 'one candidate is picked whatever the settings',
    input: [a!],
    context: context({ loadBalance: hashOnly }),
    expect: 'a',
  },
  {
    name: 'replicasLimit 1 takes the heaviest by -weight (smallest dimension)',
    input: [w('x', { s: 9, m: 1 }), w('y', { s: 3, m: 3 }), w('z', { s: 2 })],
    context: context({ loadBalance: { replicasLimit: 1 } }),
    expect: 'y',
  },
  {
    name: 'ascending weight takes the lightest',
    input: [w('x', { s: 9 }), w('y', { s: 3 }), w('z', { s: 5 })],
    context: context({ loadBalance: { replicasLimit: 1, sortBy: 'weight' } }),
    expect: 'y',
  },
  {
    name: 'sortBy a dimension name sorts on that dimension',
    input: [w('x', { s: 9, m: 1 }), w('y', { s: 3, m: 7 })],
    context: context({ loadBalance: { replicasLimit: 1, sortBy: '-m' } }),
    expect: 'y',
  },
  {
    name: 'ties break by runtime id',
    input: [w('y', { s: 3 }), w('x', { s: 3 }), w('z', { s: 3 })],
    context: context({ loadBalance: { replicasLimit: 1 } }),
    expect: 'x',
  },
  {
    name: 'holders come first even when lighter',
    input: [w('x', { s: 9 }), w('y', { s: 1 })],
    context: context({ loadBalance: { replicasLimit: 1 } }, ['y']),
    expect: 'y',
  },
  {
    name: 'a zero-weight candidate is never picked by weight',
    input: [w('x', { s: 0 }), w('y', { s: 5 })],
    context: context({ processId: 'zero' }),
    expect: 'y',
  },
];

describe('deterministicSelector', () => {
  for (const t of selectCases) {
    it(t.name, () => {
      const status = deterministicSelector.select(t.input, t.context);
      assert.equal(status.ok, true);
      if (status.ok) assert.equal(status.candidate.id, t.expect);
    });
  }

  it('rejects an empty candidate set', () => {
    const status = deterministicSelector.select([], context());
    assert.equal(status.ok, false);
    if (!status.ok) assert.equal(status.code, REASONS.noCandidates);
  });

  it('ranks holders first, then by key, then by id, cut to replicasLimit', () => {
    const input = [w('e', { s: 1 }), w('d', { s: 7 }), w('c', { s: 7 }), w('b', { s: 9 }), w('a', { s: 2 })];
    const status = deterministicSelector.select(input, context({ loadBalance: { replicasLimit: 3 } }, ['e']));
    assert.ok(status.ok);
    assert.deepEqual(ids(status.ranked), ['e', 'b', 'c']);
  });

  it('picks by a hash of the process id when chooseWeightBy is empty, spreading processes', () => {
    const input = [w('x', { s: 1 }), w('y', { s: 100 }), w('z', { s: 1 })];
    const seen = new Map<string, number>();
    for (let i = 0; i < 300; i++) {
      const status = deterministicSelector.select(input, context({ processId: `p${i}`, loadBalance: hashOnly }));
      assert.ok(status.ok);
      seen.set(status.candidate.id, (seen.get(status.candidate.id) ?? 0) + 1);
    }
    for (const id of ['x', 'y', 'z']) assert.ok((seen.get(id) ?? 0) > 60, `${id} picked ${seen.get(id)} of 300`);
  });
});

describe('availability failure message', () => {
  it('counts unavailable, draining and saturated candidates apart', () => {
    const draining = candidates(
      runtime('r', { idleWeight: { sandboxes: 0 }, metadata: { [DRAINING_METADATA_KEY]: 'true' } }),
    )[0]!;
    const status = availabilityFilter.filter([down, draining, saturated], context());
    assert.equal(status.ok, false);
    assert.match(
      !status.ok ? status.message : '',
      /none of 3 candidates can take work \(1 unavailable, 1 draining, 1 saturated in some idle-weight dimension\)/,
    );
  });
});
