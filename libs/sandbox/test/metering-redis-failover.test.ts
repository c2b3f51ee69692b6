// A runtime's metering sink through a managed Redis's endpoint (a TCP
// forwarder counting dials) in front of real redis-servers, while a failover
// moves it: the sink must follow the endpoint, without dialling the old
// primary several times a second meanwhile. Dial counts are upper bounds and
// waits are deadlines, so a slow machine only makes them easier to meet.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { redisMeteringSink, type MeteringEvent } from '@switchyard/sandbox';
import {
  redisServerMissing,
  startRedisEndpoint,
  startRedisServer,
  type RedisEndpoint,
  type RedisServer,
} from '@switchyard/service/testing';
import { captureLogger } from './fixtures/harness.ts';

const STREAM = 'switchyard:metering';
/** How long the old primary keeps the endpoint: long enough for the backoff to reach its longest pause. */
const AWAY_MS = 6_000;
/** Pause between the sandboxes started meanwhile: each writes an event. */
const EVENT_EVERY_MS = 20;
/** How soon after the endpoint moved an event must reach the new primary. */
const FOLLOW_WITHIN_MS = 5_000;

function started(process: string): MeteringEvent {
  return { event: 'start', class: 'demo', process, reason: 'created', durationMs: 1 };
}

/** The processes of the events in the stream at `url`. */
async function processesAt(url: string): Promise<string[]> {
  const reader = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  reader.on('error', () => undefined);
  try {
    return (await reader.xrange(STREAM, '-', '+')).map(([, fields]) => fields[fields.indexOf('process') + 1]!);
  } finally {
    reader.disconnect();
  }
}

/** Records an event every EVENT_EVERY_MS until one reaches the stream at `url`; fails with `what` after `withinMs`. */
async function untilWritten(sink: ReturnType<typeof redisMeteringSink>, url: string, withinMs: number, what: string) {
  const deadline = performance.now() + withinMs;
  for (let i = 0; ; i++) {
    sink.record(started(`${what}-${i}`));
    await sleep(EVENT_EVERY_MS);
    if ((await processesAt(url)).some((p) => p.startsWith(`${what}-`))) return;
    assert.ok(performance.now() < deadline, `no event reached ${what} within ${withinMs} ms`);
  }
}

describe('redis metering sink through an endpoint a failover moves', { skip: redisServerMissing }, () => {
  let primary: RedisServer;
  let promoted: RedisServer;
  let endpoint: RedisEndpoint;
  let sink: ReturnType<typeof redisMeteringSink>;

  before(async () => {
    primary = await startRedisServer();
    promoted = await startRedisServer();
  });
  after(async () => {
    await primary?.stop('SIGKILL');
    await promoted?.stop('SIGKILL');
  });

  /** A sink writing through a new endpoint to the primary, once an event of it reached the primary. */
  async function sinkOnPrimary(): Promise<void> {
    endpoint = await startRedisEndpoint(primary.port);
    sink = redisMeteringSink({ url: `redis://127.0.0.1:${endpoint.port}`, stream: STREAM, logger: captureLogger() });
    await untilWritten(sink, primary.url, FOLLOW_WITHIN_MS, 'primary');
  }
  async function closeSink(): Promise<void> {
    await sink?.close();
    await endpoint?.close();
  }

  it('dials a demoted primary at a pace that slows down, and follows the endpoint soon after it moves', async () => {
    try {
      await sinkOnPrimary();
      // Demoted before the endpoint moves (a DNS name's TTL, a proxy's health check): it keeps the
      // sink's connection open and answers every write with READONLY.
      const admin = new Redis(primary.url);
      try {
        await admin.replicaof('127.0.0.1', promoted.port);
      } finally {
        admin.disconnect();
      }
      const dialled = endpoint.dials;
      const demoted: string[] = [];
      for (let i = 0, deadline = performance.now() + AWAY_MS; performance.now() < deadline; i++) {
        demoted.push(`demoted-${i}`);
        sink.record(started(`demoted-${i}`));
        await sleep(EVENT_EVERY_MS);
      }
      const dials = endpoint.dials - dialled;
      // A connection ready for a moment does not start the backoff over: about 10 dials.
      assert.ok(dials <= 20, `${dials} dials in ${AWAY_MS} ms`);
      endpoint.target = promoted.port;
      await untilWritten(sink, promoted.url, FOLLOW_WITHIN_MS, 'promoted');
      // Refused by the demoted primary, they waited for the new one: none is lost, and they come before
      // the events recorded after them.
      const written = await processesAt(promoted.url);
      assert.deepEqual(
        written.filter((p) => p.startsWith('demoted-')),
        demoted,
      );
      assert.ok(written.indexOf(demoted.at(-1)!) < written.findIndex((p) => p.startsWith('promoted-')));
    } finally {
      await closeSink();
      const admin = new Redis(primary.url);
      await admin.replicaof('NO', 'ONE').finally(() => admin.disconnect());
    }
  });

  it('leaves a connection that stopped answering and writes its events on the new primary', async () => {
    try {
      await sinkOnPrimary();
      // The primary's host is gone without a word: the open connection carries nothing more, new ones
      // reach the new primary.
      endpoint.freeze();
      endpoint.target = promoted.port;
      sink.record(started('unanswered'));
      await untilWritten(sink, promoted.url, FOLLOW_WITHIN_MS, 'after-freeze');
      // Sent again on the new connection with those after it, and maybe read before it was written.
      for (let polls = 0; !(await processesAt(promoted.url)).includes('unanswered'); polls++) {
        assert.ok(polls < 50, 'the event sent unanswered is sent again');
        await sleep(EVENT_EVERY_MS);
      }
    } finally {
      await closeSink();
    }
  });
});
