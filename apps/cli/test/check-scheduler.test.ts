// `switchyard check scheduler` passes only when every answer names one
// leader and term and holds one epoch its leader confirmed lately: the
// verdict on a set of answers, as a table.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { EpochLine } from '../src/answers.ts';
import { passedLine, schedulerVerdict, type ReplicaView } from '../src/check-scheduler.ts';

const LEADER = { id: 's0', url: 'http://10.0.0.1:7070' };

function view(url: string, line: Partial<EpochLine> = {}): ReplicaView {
  return {
    url,
    line: {
      replica: url,
      epoch: 7,
      epochAgeMs: 300,
      term: 2,
      leader: LEADER,
      counts: { runtimes: 1, processes: 0, threads: 0 },
      ...line,
    },
  };
}

const CASES: Array<{ name: string; views: ReplicaView[]; problem?: RegExp }> = [
  { name: 'passes when every replica names one leader, term and epoch', views: [view('a'), view('b'), view('c')] },
  {
    name: 'passes a replica of a release that reports no epoch age',
    views: [view('a'), view('b', { epochAgeMs: undefined })],
  },
  {
    name: 'fails a replica that knows no leader',
    views: [view('a'), view('b', { leader: null })],
    problem: /^b knows no leader$/,
  },
  {
    name: 'fails a replica with no epoch yet',
    views: [view('a', { epoch: null, epochAgeMs: null }), view('b')],
    problem: /^a holds no epoch yet$/,
  },
  {
    name: 'fails a replica its leader has not reached lately',
    views: [view('a'), view('b', { epochAgeMs: 42_000 })],
    problem: /^no leader has reached b for 42 s$/,
  },
  {
    name: 'fails replicas naming different leaders',
    views: [view('a'), view('b', { leader: { id: 's1', url: 'http://10.0.0.2:7070' } })],
    problem: /^the replicas name different leaders: s0 \(http:\/\/10\.0\.0\.1:7070\) \(a\), s1 .* \(b\)$/,
  },
  {
    name: 'fails leaders of one id at different URLs (two clusters)',
    views: [view('a'), view('b', { leader: { id: 's0', url: 'http://10.9.0.1:7070' } })],
    problem: /^the replicas name different leaders/,
  },
  {
    name: 'fails replicas in different terms',
    views: [view('a'), view('b'), view('c', { term: 3 })],
    problem: /^the replicas are in different terms: 2 \(a, b\), 3 \(c\)$/,
  },
  {
    name: 'fails replicas holding different epochs',
    views: [view('a'), view('b', { epoch: 8 })],
    problem: /^the replicas hold different epochs: 7 \(a\), 8 \(b\)$/,
  },
  {
    name: 'escapes what a replica answers before showing it',
    views: [view('a', { leader: { id: 's0\u001b[2J', url: 'x' } }), view('b')],
    problem: /s0\\u001b\[2J/,
  },
];

describe('switchyard check scheduler: the verdict on the replicas answers', () => {
  for (const c of CASES) {
    it(c.name, () => {
      const verdict = schedulerVerdict(c.views);
      if (!c.problem) {
        assert.ok(verdict.ok, verdict.ok ? '' : verdict.problem);
        assert.equal(verdict.summary, 'leader s0 (http://10.0.0.1:7070), term 2, epoch 7');
        return;
      }
      assert.ok(!verdict.ok, 'fails');
      assert.match(verdict.problem, c.problem);
    });
  }
});

describe('the line of a passed check', () => {
  it('names the replicas read besides the URL, and none when none was named', () => {
    const summary = 'leader s0 (http://10.0.0.1:7070), term 2, epoch 7';
    assert.equal(
      passedLine(summary, 3, 'http://svc:7070'),
      `scheduler ok: ${summary}, on 3 replicas and through http://svc:7070`,
    );
    assert.equal(
      passedLine(summary, 1, 'http://svc:7070'),
      `scheduler ok: ${summary}, on 1 replica and through http://svc:7070`,
    );
    assert.equal(
      passedLine(summary, 0, 'http://127.0.0.1:7070'),
      `scheduler ok: ${summary}, through http://127.0.0.1:7070`,
    );
  });
});
