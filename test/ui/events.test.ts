// The live page's HTTP surface on a real replica: static files with a strict
// policy, the `/ui/events` SSE stream (state on connect, prompt push on
// change, bounded subscribers) and the error answers of the `/ui` routes.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { RuntimeNode } from '@switchyard/runtime';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { epochOf, runtimeIds, startReplicas, startRuntime, until } from './cluster.ts';
import { SseStream } from './sse.ts';

interface State {
  replica: string;
  epoch: number | null;
  term: number;
  isLeader: boolean;
  leader: { id: string } | null;
  runtimes: Array<{ id: string; idleWeight: Record<string, number>; processes: number }>;
}

describe('live page endpoints', () => {
  let replicas: SchedulerReplica[] = [];
  const runtimes: RuntimeNode[] = [];
  const streams: SseStream[] = [];
  let base = '';

  before(async () => {
    replicas = await startReplicas(2);
    base = replicas[1]!.url;
    runtimes.push(await startRuntime('rt-a', replicas[0]!.url));
    await until('both replicas to list rt-a', async () =>
      (await Promise.all(replicas.map((r) => runtimeIds(r.url)))).every((ids) => ids.includes('rt-a')),
    );
  });

  after(async () => {
    for (const s of streams) s.close();
    await Promise.allSettled(runtimes.map((r) => r.close()));
    await Promise.allSettled(replicas.map((r) => r.close()));
  });

  const routes = [
    { name: 'serves the page as HTML under a same-origin-only policy', path: '/ui', status: 200, type: 'text/html' },
    { name: 'serves the script', path: '/ui/app.js', status: 200, type: 'text/javascript' },
    { name: 'serves the stylesheet', path: '/ui/style.css', status: 200, type: 'text/css' },
    { name: 'answers 404 with a JSON error for an unknown file', path: '/ui/nope.js', status: 404, type: 'json' },
    { name: 'redirects the trailing-slash form to /ui', path: '/ui/', status: 308, type: '' },
  ];
  for (const route of routes) {
    it(route.name, async () => {
      const res = await fetch(`${base}${route.path}`, { redirect: 'manual' });
      await res.arrayBuffer();
      assert.equal(res.status, route.status);
      assert.ok((res.headers.get('content-type') ?? '').includes(route.type));
      if (route.status === 200) assert.match(res.headers.get('content-security-policy') ?? '', /default-src 'none'/);
      if (route.status === 308) assert.equal(res.headers.get('location'), '/ui');
    });
  }

  it('refuses methods other than GET with 405', async () => {
    const res = await fetch(`${base}/ui/events`, { method: 'POST', body: '{}' });
    assert.equal(res.status, 405);
    assert.equal(res.headers.get('allow'), 'GET');
    assert.equal(((await res.json()) as { code: string }).code, 'method_not_allowed');
  });

  it('answers HEAD on /ui/events with the stream headers at once', async () => {
    const res = await fetch(`${base}/ui/events`, { method: 'HEAD', signal: AbortSignal.timeout(3000) });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
  });

  it('sends the current state at once, matching /api/epoch and /api/runtimes', async () => {
    const stream = await SseStream.open(`${base}/ui/events`);
    streams.push(stream);
    assert.equal(stream.status, 200);
    assert.match(stream.headers.get('content-type') ?? '', /^text\/event-stream/);
    const state = await stream.nextState<State>(() => true, 1000);
    stream.close();
    const epoch = await epochOf(base);
    assert.equal(state.replica, 's1');
    assert.equal(state.leader?.id, epoch.leader?.id);
    assert.equal(state.term, epoch.term);
    assert.ok(state.epoch !== null && epoch.epoch !== null && state.epoch <= epoch.epoch);
    assert.deepEqual(
      state.runtimes.map((r) => r.id),
      await runtimeIds(base),
    );
    assert.deepEqual(state.runtimes[0]!.idleWeight, { sandboxes: 10 });
    assert.equal(stream.frames[0]!.retry, 2000, 'the first frame tells the browser how fast to reconnect');
  });

  it('pushes a new state when a runtime joins, with a higher epoch', async () => {
    const stream = await SseStream.open(`${base}/ui/events`);
    streams.push(stream);
    const first = await stream.nextState<State>();
    runtimes.push(await startRuntime('rt-b', replicas[1]!.url));
    const joined = await stream.nextState<State>((s) => s.runtimes.some((r) => r.id === 'rt-b'), 5000);
    stream.close();
    assert.ok(joined.epoch! > first.epoch!, `epoch ${joined.epoch} after ${first.epoch}`);
    assert.deepEqual(
      joined.runtimes.map((r) => r.id),
      ['rt-a', 'rt-b'],
    );
  });

  it('keeps sending states about every second while nothing changes', async () => {
    const stream = await SseStream.open(`${base}/ui/events`);
    streams.push(stream);
    const started = performance.now();
    await stream.nextState<State>();
    await stream.nextState<State>();
    await stream.nextState<State>();
    stream.close();
    // Three states: one on connect and two ticks; a stuck timer would time out instead.
    assert.ok(performance.now() - started < 4000);
  });

  it('caps subscribers: the 33rd concurrent stream gets 503 and a retry hint', async () => {
    const open: SseStream[] = [];
    try {
      for (let i = 0; i < 32; i++) open.push(await SseStream.open(`${replicas[0]!.url}/ui/events`));
      assert.ok(open.every((s) => s.status === 200));
      const res = await fetch(`${replicas[0]!.url}/ui/events`);
      assert.equal(res.status, 503);
      assert.equal(res.headers.get('retry-after'), '5');
      assert.equal(((await res.json()) as { code: string }).code, 'capacity_exhausted');
    } finally {
      for (const s of open) s.close();
    }
    const again = await until('a slot to free up after the streams closed', async () => {
      const s = await SseStream.open(`${replicas[0]!.url}/ui/events`);
      if (s.status === 200) return s;
      s.close();
      return undefined;
    });
    streams.push(again);
    assert.equal((await again.nextState<State>()).replica, 's0');
  });
});
