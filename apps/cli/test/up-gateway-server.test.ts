// The gateway of `switchyard up` (in-process) holds its clients to what the
// deployed gateway holds them to, with the gateway app's defaults: a client
// trickling its headers is cut at headersTimeoutMs (30 s, checked every
// second), not at Node's 60 s checked every 30 s; the listener is capped at
// connectionsMax. `up` as a real child process, raw sockets on loopback.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { CONNECTIONS_MAX_DEFAULT } from '@switchyard/service';
import { GATEWAY_DEFAULTS } from '@switchyard/gateway';
import { killGroup, mcpUrlOf, spawnCli, type Running } from './support.ts';

/** Leeway past the deadline for a loaded machine; Node's own check interval alone would add up to 30 s. */
const SLACK_MS = 8_000;

/** How long the listener on `port` holds a connection that sends a header block a byte a second, never its end. */
function heldWhileTrickling(port: number, limitMs: number): Promise<number> {
  const head = `POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Pad: ${'a'.repeat(100)}`;
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const started = performance.now();
    let sent = 0;
    const feed = setInterval(() => {
      if (sent < head.length && !socket.destroyed) socket.write(head[sent++]!);
    }, 1000);
    socket.on('error', () => {});
    socket.resume();
    const limit = setTimeout(() => {
      socket.destroy();
      reject(new Error(`still open after ${limitMs} ms`));
    }, limitMs);
    socket.once('close', () => {
      clearTimeout(limit);
      clearInterval(feed);
      resolve(performance.now() - started);
    });
  });
}

async function metricValue(base: string, name: string): Promise<number | undefined> {
  const res = await fetch(`${base}/metrics`, { signal: AbortSignal.timeout(5000) });
  const line = (await res.text()).split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}

describe("the gateway of switchyard up and the gateway app's server settings", () => {
  let up: Running;
  let base = '';
  let port = 0;

  before(async () => {
    up = spawnCli(['up', '--gateway-port', '0', '--scheduler-port', '0']);
    base = (await mcpUrlOf(up, 20_000)).replace(/\/mcp$/, '');
    port = Number(new URL(base).port);
  });
  after(() => killGroup(up.child));

  it('closes a connection trickling its headers at headersTimeoutMs', async () => {
    const deadlineMs = GATEWAY_DEFAULTS.headersTimeoutMs;
    const heldMs = await heldWhileTrickling(port, deadlineMs + SLACK_MS);
    assert.ok(heldMs >= deadlineMs - 100, `closed after ${heldMs} ms, before the deadline`);
  });

  it('caps its connections at connectionsMax', async () => {
    assert.equal(await metricValue(base, 'switchyard_gateway_connections_max'), CONNECTIONS_MAX_DEFAULT);
  });
});
