// A runtime's metering sink while its Redis is away for longer than a few
// redials (a restart, a failover of 10–60 s): the events recorded meanwhile
// wait in the sink's own bounded queue and are written, in order, each once,
// when Redis is back. Against real redis-servers; waits are deadlines, so a
// slow machine only makes them easier to meet.
import assert from 'node:assert/strict';
import { createConnection, createServer, type AddressInfo, type Server } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { ManualClock } from '@switchyard/clock/testing';
import { redisMeteringSink, type MeteringEvent } from '@switchyard/sandbox';
import { createMetrics, type Metrics } from '@switchyard/service';
import { redisServerMissing, startRedisServer, type RedisServer } from '@switchyard/service/testing';
import { captureLogger } from './fixtures/harness.ts';

const STREAM = 'switchyard:metering';
/** Longer than the sink ever gave up after before it queued events itself (three redials, at most 350 ms). */
const AWAY_MS = 3_000;

function started(process: string): MeteringEvent {
  return { event: 'start', class: 'demo', process, reason: 'created', durationMs: 1 };
}

async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    assert.ok(performance.now() < deadline, `timed out waiting for ${what}`);
    await sleep(10);
  }
}

/** The entries of `stream` at `url`, each as an object of its fields. */
async function entriesAt(url: string, stream = STREAM): Promise<Record<string, string | undefined>[]> {
  const reader = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  reader.on('error', () => undefined);
  try {
    const entries = await reader.xrange(stream, '-', '+');
    return entries.map(([, fields]) =>
      Object.fromEntries(fields.flatMap((f, i) => (i % 2 ? [] : [[f, fields[i + 1]]]))),
    );
  } catch {
    return [];
  } finally {
    reader.disconnect();
  }
}

/** Runs `command` on the Redis at `url` and hangs up. */
/** A metric's value in `metrics`, for the label set given (or the unlabelled one). */
async function valueOf(
  metrics: Metrics,
  name: string,
  labels: Record<string, string> = {},
): Promise<number | undefined> {
  const metric = metrics.registry.getSingleMetric(`switchyard_runtime_${name}`);
  const { values } = await metric!.get();
  const same = (l: Record<string, unknown>): boolean => Object.entries(labels).every(([k, v]) => l[k] === v);
  return values.find((v) => same(v.labels))?.value;
}

async function admin<T>(url: string, command: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis(url);
  try {
    return await command(redis);
  } finally {
    redis.disconnect();
  }
}

/** A port this test holds throughout: each connection is reset while `away`, else forwarded to `port`. */
async function startFront(port: number): Promise<{ port: number; away: boolean; resets: number; server: Server }> {
  const front = {
    port: 0,
    away: true,
    resets: 0,
    server: createServer((socket) => {
      if (front.away) return void (front.resets++, socket.resetAndDestroy());
      const upstream = createConnection({ host: '127.0.0.1', port });
      socket.pipe(upstream).pipe(socket);
      upstream.on('error', () => socket.destroy());
      socket.on('error', () => upstream.destroy());
    }),
  };
  await new Promise<void>((resolve) => front.server.listen(0, '127.0.0.1', resolve));
  front.port = (front.server.address() as AddressInfo).port;
  return front;
}

describe('redis metering sink while Redis is away', { skip: redisServerMissing }, () => {
  let redis: RedisServer;
  before(async () => {
    redis = await startRedisServer();
  });
  after(async () => {
    await redis?.stop('SIGKILL');
  });

  it('writes the events recorded while Redis was stopped, in order, once each, stamped when recorded', async () => {
    const server = await startRedisServer();
    let restarted: RedisServer | undefined;
    const clock = new ManualClock();
    const sink = redisMeteringSink({ url: server.url, stream: STREAM, logger: captureLogger(), clock });
    try {
      sink.record(started('before'));
      await waitFor('the first event', async () => (await entriesAt(server.url)).length === 1);
      await server.stop('SIGKILL');
      const recordedAtMs: number[] = [];
      for (let i = 0; i < 50; i++) {
        clock.stepWall(1_000);
        recordedAtMs.push(clock.now());
        sink.record(started(`away-${i}`));
      }
      await sleep(AWAY_MS);
      // Started again on its port, empty (no persistence): what it held before is gone with it.
      restarted = await startRedisServer({ port: server.port });
      await waitFor('the events recorded meanwhile', async () => (await entriesAt(server.url)).length >= 50);
      const entries = await entriesAt(server.url);
      assert.deepEqual(
        entries.map((e) => e.process),
        recordedAtMs.map((_, i) => `away-${i}`),
      );
      assert.deepEqual(
        entries.map((e) => Number(e.atMs)),
        recordedAtMs,
      );
    } finally {
      await sink.close();
      await restarted?.stop('SIGKILL');
      await server.stop('SIGKILL');
    }
  });

  it('holds at most queueLengthMax events: the oldest are dropped, and a warning counts them', async () => {
    const front = await startFront(redis.port);
    const stream = 'switchyard:metering:bounded';
    const logger = captureLogger();
    const clock = new ManualClock();
    const url = `redis://127.0.0.1:${front.port}`;
    const metrics = createMetrics('runtime');
    const sink = redisMeteringSink({ url, stream, logger, clock, queueLengthMax: 3, metrics });
    const lines = () => logger.lines.filter((l) => l.obj.event === 'metering.queue_full');
    try {
      for (let i = 0; i < 10; i++) sink.record(started(`q-${i}`));
      assert.equal(lines().length, 1, 'the first event dropped is warned of at once');
      assert.equal(lines()[0]!.obj.dropped, 1);
      assert.equal(await valueOf(metrics, 'metering_events_waiting'), 3);
      assert.equal(await valueOf(metrics, 'metering_events_dropped_total', { reason: 'queue_full' }), 7);
      assert.equal(await valueOf(metrics, 'metering_events_dropped_total', { reason: 'refused' }), 0);
      front.away = false;
      // The rest are counted when Redis is back, no sooner than 10 s after the last warning (connection
      // errors met meanwhile are warned of again, each resetting those 10 s).
      await waitFor('the count of events dropped', async () => {
        await clock.advance(10_000);
        return lines().length > 1;
      });
      assert.equal(lines()[1]!.obj.dropped, 7, 'seven dropped in all');
      assert.equal(lines()[1]!.obj.unlogged, 6, 'six not warned of one by one');
      await waitFor('the newest three', async () => (await entriesAt(redis.url, stream)).length >= 3);
      assert.deepEqual(
        (await entriesAt(redis.url, stream)).map((e) => e.process),
        ['q-7', 'q-8', 'q-9'],
      );
      await waitFor('none waiting', async () => (await valueOf(metrics, 'metering_events_waiting')) === 0);
    } finally {
      await sink.close();
      front.server.close();
    }
  });

  it('keeps a write Redis refused for a passing reason (out of memory) and writes it once Redis takes it', async () => {
    const stream = 'switchyard:metering:oom';
    const logger = captureLogger();
    const sink = redisMeteringSink({ url: redis.url, stream, logger, clock: new ManualClock() });
    try {
      await admin(redis.url, (r) => r.config('SET', 'maxmemory', '1'));
      sink.record(started('oom-0'));
      sink.record(started('oom-1'));
      await waitFor('the refusal', () => logger.lines.some((l) => l.obj.event === 'metering.write_deferred'));
      assert.match(String(logger.lines.find((l) => l.obj.event === 'metering.write_deferred')!.obj.err), /OOM/);
      await admin(redis.url, (r) => r.config('SET', 'maxmemory', '0'));
      await waitFor('both events', async () => (await entriesAt(redis.url, stream)).length >= 2);
      assert.deepEqual(
        (await entriesAt(redis.url, stream)).map((e) => e.process),
        ['oom-0', 'oom-1'],
      );
      assert.equal(logger.lines.filter((l) => l.obj.event === 'metering.write_failed').length, 0, 'none dropped');
    } finally {
      await admin(redis.url, (r) => r.config('SET', 'maxmemory', '0'));
      await sink.close();
    }
  });

  it('drops a write Redis refuses for good (WRONGTYPE), warns of it, and writes the events after it', async () => {
    const stream = 'switchyard:metering:wrongtype';
    const logger = captureLogger();
    const clock = new ManualClock();
    const metrics = createMetrics('runtime');
    const sink = redisMeteringSink({ url: redis.url, stream, logger, clock, metrics });
    const failed = () => logger.lines.filter((l) => l.obj.event === 'metering.write_failed');
    try {
      await admin(redis.url, (r) => r.set(stream, 'not a stream'));
      sink.record(started('wrong-0'));
      await waitFor('the first refusal', () => failed().length === 1);
      assert.match(String(failed()[0]!.obj.err), /WRONGTYPE/);
      // A warning each 10 s at most: the next, once they are up, tells that the second was refused too.
      await clock.advance(10_000);
      sink.record(started('wrong-1'));
      await waitFor('the second refusal', () => failed().length === 2);
      await admin(redis.url, (r) => r.del(stream));
      sink.record(started('right-2'));
      await waitFor('the event after them', async () => (await entriesAt(redis.url, stream)).length >= 1);
      assert.deepEqual(
        (await entriesAt(redis.url, stream)).map((e) => e.process),
        ['right-2'],
      );
      assert.equal(await valueOf(metrics, 'metering_events_dropped_total', { reason: 'refused' }), 2);
      assert.equal(await valueOf(metrics, 'metering_events_dropped_total', { reason: 'queue_full' }), 0);
    } finally {
      await sink.close();
    }
  });

  it('on close, writes the events that waited while Redis was away, once it is back within the bound', async () => {
    const front = await startFront(redis.port);
    const stream = 'switchyard:metering:closing';
    const logger = captureLogger();
    const sink = redisMeteringSink({
      url: `redis://127.0.0.1:${front.port}`,
      stream,
      logger,
      clock: new ManualClock(),
    });
    try {
      for (let i = 0; i < 3; i++) sink.record(started(`c-${i}`));
      await waitFor('four refused dials', () => front.resets >= 4);
      front.away = false;
      // The manual clock does not move: close waits for the writes however long the redial takes.
      await sink.close();
      assert.deepEqual(
        (await entriesAt(redis.url, stream)).map((e) => e.process),
        ['c-0', 'c-1', 'c-2'],
      );
      assert.equal(logger.lines.filter((l) => l.obj.event === 'metering.close_abandoned').length, 0);
    } finally {
      await sink.close();
      front.server.close();
    }
  });

  it('on close, gives up after its bound, counting the events that waited', async () => {
    const logger = captureLogger();
    const clock = new ManualClock();
    const sink = redisMeteringSink({ url: 'redis://127.0.0.1:1', stream: STREAM, logger, clock });
    for (let i = 0; i < 3; i++) sink.record(started(`gone-${i}`));
    await sleep(1_000);
    const closing = sink.close();
    await clock.advance(2_000);
    await closing;
    const abandoned = logger.lines.find((l) => l.obj.event === 'metering.close_abandoned');
    assert.equal(abandoned?.obj.unwritten, 3);
  });
});
