// The steps of a runtime node's dialling, as `onTunnelEvent` tells them: a
// dial to 127.0.0.1:1 (nothing listens) fails, the next, to a real tunnel
// endpoint on loopback standing in for the scheduler, comes up, the
// endpoint opens /watch through it as a scheduler does, and the tunnel goes
// when the endpoint closes it. The node's clock is manual, so
// the redial between the two happens when the test says.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type net from 'node:net';
import { describe, it } from 'node:test';
import { ManualClock } from '@switchyard/clock/testing';
import { createTunnelEndpoint } from '@switchyard/tunnel';
import { startRuntimeNode, type TunnelEvent } from '../src/index.ts';
import { nodeOptions } from './support.ts';

const JOIN_TOKEN = 'join-token-0123456789';

/** Polls `probe` every 20 ms, for up to 10 s. */
async function until(what: string, probe: () => boolean): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (probe()) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('runtime node tunnel events', () => {
  it('tells each dial starting and how it ended, a scheduler watching the tunnel, and the tunnel going', async () => {
    const endpoint = createTunnelEndpoint({
      tokens: () => [JOIN_TOKEN],
      maxRuntimes: 1,
      logger: { info() {}, warn() {}, error() {} },
      // A scheduler's first request on a tunnel it took: the runtime's state stream.
      onTunnel: (tunnel) =>
        void tunnel
          .fetch('http://runtime/watch')
          .then((res) => res.body?.cancel())
          .catch(() => {}),
      onTunnelClosed: () => {},
    });
    const server = http.createServer((_req, res) => res.writeHead(404).end());
    server.on('upgrade', (req, socket, head) => endpoint.handleUpgrade(req, socket, head));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const clock = new ManualClock();
    const events: TunnelEvent[] = [];
    const node = await startRuntimeNode({
      ...(await nodeOptions({ demo: { engine: 'builtin' } })),
      fallbackSchedulerUrls: [`http://127.0.0.1:${(server.address() as net.AddressInfo).port}`],
      clock,
      onTunnelEvent: (event) => void events.push(event),
    });
    try {
      await until('the first dial failing', () => events.length >= 2);
      assert.deepEqual(events[0], { type: 'dialling' });
      assert.equal(events[1]!.type, 'failed');
      assert.match((events[1] as { reason: string }).reason, /ECONNREFUSED/);
      // The first redial is due within 250 ms, less jitter.
      await clock.advance(300);
      await until('the tunnel watched', () => events.some((e) => e.type === 'watched'));
      assert.deepEqual(events.slice(2), [{ type: 'dialling' }, { type: 'up' }, { type: 'watched' }]);
      endpoint.close();
      await until('the tunnel down', () => events.some((e) => e.type === 'down'));
      assert.equal(events.length, 6, JSON.stringify(events));
    } finally {
      await Promise.all([node.close(), clock.advance(30_000)]);
      server.closeAllConnections();
      server.close();
    }
  });
});
