// A replica's forward of `/api/proxy` to the owner replica, between real
// HTTP servers on loopback: the front forwards every request it gets, the
// owner holds some answers open as event streams do.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { FORWARDED_HEADER } from '@switchyard/protocol';
import { forwardToReplica } from '../src/forward.ts';

async function listen(server: http.Server): Promise<string> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** `promise`, or a failure naming `what` once `ms` have passed without it. */
async function within<T>(ms: number, promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Sends a GET and resolves once the head is in (the body may never end). */
function head(url: string, agent: http.Agent): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => http.get(url, { agent }, resolve).once('error', reject));
}

describe('forwardToReplica', () => {
  const servers: http.Server[] = [];
  after(() => {
    for (const s of servers) {
      s.closeAllConnections();
      s.close();
    }
  });

  it('does not hold a request back behind the event streams it already forwards to the owner', async () => {
    // More than any fixed per-owner socket cap a forward might keep (256 was one).
    const STREAMS = 300;
    const owner = http.createServer((req, res) => {
      if (req.url?.endsWith('/watch')) {
        // An event stream: its head, then silence for as long as the client listens.
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        return void res.flushHeaders();
      }
      res.end('ok');
    });
    const ownerUrl = await listen(owner);
    const front = http.createServer((req, res) => forwardToReplica(req, res, `${ownerUrl}${req.url}`, 'r1'));
    const frontUrl = await listen(front);
    servers.push(owner, front);
    // The callers' own connections: one each, so only the forward could make them wait.
    const callers = new http.Agent({ keepAlive: false, maxSockets: Infinity });

    const streams = await within(
      5000,
      Promise.all(Array.from({ length: STREAMS }, () => head(`${frontUrl}/watch`, callers))),
      `${STREAMS} event streams forwarded at once`,
    );
    assert.ok(streams.every((s) => s.statusCode === 200 && s.headers[FORWARDED_HEADER] === '1'));
    const answer = await within(5000, head(`${frontUrl}/healthz`, callers), `a request behind ${STREAMS} streams`);
    assert.equal(answer.statusCode, 200);
    assert.equal(answer.headers[FORWARDED_HEADER], '1');
    callers.destroy();
  });
});
