// A caller whose host vanishes (powered off, partitioned: no FIN, no RST)
// while it reads a stream from a runtime over HTTP/1.1 here: an /api/proxy
// request, or a relay connection (a gateway in relay mode). HTTP/1.1 has no
// ping; a stream that keeps writing waits, once the kernel's buffers are
// full, for acknowledgements that never come, and TCP keepalive does not
// probe meanwhile: only the kernel's retransmission timeout (about 15
// minutes) would end it, and the runtime's stream behind it. The replica
// closes a connection whose writes have waited writeStallTimeoutMs with no
// byte taken. The caller reaches the replica through a TCP relay that can
// stop carrying bytes both ways without closing.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { MemoryLeaseStore } from '@switchyard/election';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { freezableRelay } from '@switchyard/service/testing';
import { dialTunnel, type TunnelDialer } from '@switchyard/tunnel';
import { TOKEN, quietLogger, startReplicas, until } from './support.ts';

/** Short, for a test in real time; far above what a loopback reader that is there takes to make room. */
const WRITE_STALL_TIMEOUT_MS = 1000;
const EVENT = Buffer.from(`data: ${'x'.repeat(1017)}\n\n`);

/** What the stand-in runtime writes its answer to, over the tunnel (HTTP/2) or a relay connection (HTTP/1.1). */
interface Answer {
  readonly destroyed: boolean;
  writeHead(status: number, headers: Record<string, string>): { end(): unknown };
  write(chunk: Buffer): boolean;
  once(event: 'close' | 'drain', listener: () => void): unknown;
}

describe('a caller that vanishes while it reads a stream over HTTP/1.1', () => {
  let replica: SchedulerReplica;
  let standIn: TunnelDialer | undefined;
  /** The stand-in runtime's streams still open. */
  let streamsOpen = 0;

  /** An event stream that writes as fast as its reader takes it. */
  const stream = (url: string | undefined, res: Answer): void => {
    // The replica's own watch of the runtime's state is none of this test's.
    if (url !== '/stream') return void res.writeHead(404, {}).end();
    streamsOpen++;
    res.once('close', () => streamsOpen--);
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const pump = (): void => {
      while (!res.destroyed && res.write(EVENT));
      if (!res.destroyed) res.once('drain', pump);
    };
    pump();
  };

  before(async () => {
    [replica] = (await startReplicas(1, new MemoryLeaseStore(), quietLogger, {
      writeStallTimeoutMs: WRITE_STALL_TIMEOUT_MS,
    })) as [SchedulerReplica];
    standIn = dialTunnel({
      url: replica.url,
      token: TOKEN,
      info: { id: 'stand-in', classes: ['demo'], metadata: {}, version: '1.0.0', limits: {} },
      handler: (req, res) => stream(req.url, res),
      relayHandler: (req, res) => stream(req.url, res),
    });
    await until('the stand-in runtime connected', () => standIn!.connected);
  });
  after(async () => {
    await standIn?.close();
    await replica?.close();
  });

  const request = 'GET /stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';
  for (const [what, opening] of [
    ['an /api/proxy stream', `GET /api/proxy/stand-in/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`],
    [
      'a stream on a relay connection',
      'GET /api/relay/stand-in HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: switchyard-relay\r\n\r\n' +
        request,
    ],
  ] as const) {
    it(`has ${what} closed once its writes wait writeStallTimeoutMs, and the runtime's stream behind it`, async () => {
      const relay = await freezableRelay(replica.port);
      const caller = net.connect(relay.port, '127.0.0.1');
      caller.on('error', () => {});
      try {
        let received = 0;
        caller.on('data', (chunk: Buffer) => (received += chunk.length));
        caller.write(opening);
        await until('the stream to flow', () => received > 1024 * 1024 || undefined);
        assert.equal(streamsOpen, 1);

        relay.freeze();
        const frozenAt = performance.now();
        await until(
          'the runtime stream behind the frozen connection to close',
          () => streamsOpen === 0 || undefined,
          15_000,
        );
        const tookMs = performance.now() - frozenAt;
        assert.ok(tookMs < 10_000, `closed ${tookMs} ms after the freeze (bound ${WRITE_STALL_TIMEOUT_MS} ms)`);
        const metrics = await (await fetch(`${replica.url}/metrics`)).text();
        assert.match(metrics, /^switchyard_scheduler_connections_write_stalled_total [1-9]/m);
      } finally {
        caller.destroy();
        relay.close();
      }
    });
  }
});
