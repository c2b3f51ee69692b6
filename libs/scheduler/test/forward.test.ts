// A replica's forward of `/api/proxy` to the owner replica, between real
// HTTP servers on loopback: the front forwards every request it gets, the
// owner holds some answers open as event streams do, or never takes a
// connection at all.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { within } from '@switchyard/clock/testing';
import { FORWARDED_HEADER } from '@switchyard/protocol';
import { forwardToReplica } from '../src/forward.ts';

async function listen(server: http.Server): Promise<string> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Sends a GET and resolves once the head is in (the body may never end). */
function head(url: string, agent: http.Agent): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => http.get(url, { agent }, resolve).once('error', reject));
}

/**
 * A listener whose accept queue is full, as seen from a host that vanished:
 * new SYNs are dropped without a reset, so a connect waits for the kernel's
 * retries. It listens in a child that blocks its event loop before it ever
 * accepts (Linux queues backlog + 1 handshakes), and `fillers` take the queue.
 */
async function silentListener(): Promise<{ url: string; child: ChildProcess; fillers: net.Socket[] }> {
  const BACKLOG = 1;
  const code = `const s = require('node:net').createServer();
s.listen({ port: 0, host: '127.0.0.1', backlog: ${BACKLOG} }, () => {
  console.log(s.address().port);
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
});`;
  const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = (await within(once(child.stdout!, 'data'), 5000, 'the silent listener port')) as [Buffer];
  const port = Number(line.toString().trim());
  const fillers = Array.from({ length: BACKLOG + 1 }, () => net.connect(port, '127.0.0.1'));
  await within(Promise.all(fillers.map((s) => once(s, 'connect'))), 5000, 'the accept queue filled');
  return { url: `http://127.0.0.1:${port}`, child, fillers };
}

describe('forwardToReplica', () => {
  const servers: http.Server[] = [];
  const children: ChildProcess[] = [];
  const sockets: net.Socket[] = [];
  after(() => {
    for (const s of servers) {
      s.closeAllConnections();
      s.close();
    }
    for (const s of sockets) s.destroy();
    for (const c of children) c.kill('SIGKILL');
  });

  it('answers 502 after the connect timeout when the owner never takes the connection, not after the SYN retries', async () => {
    const owner = await silentListener();
    children.push(owner.child);
    sockets.push(...owner.fillers);
    const CONNECT_TIMEOUT_MS = 300;
    const front = http.createServer((req, res) =>
      forwardToReplica(req, res, `${owner.url}${req.url}`, 'r1', { connectTimeoutMs: CONNECT_TIMEOUT_MS }),
    );
    const frontUrl = await listen(front);
    servers.push(front);

    const started = performance.now();
    // The kernel's first SYN retry comes after 1 s, its last after about 127 s.
    const res = await within(fetch(`${frontUrl}/api/proxy/r1/mcp`), 5000, 'an answer from the forwarding replica');
    const elapsedMs = performance.now() - started;
    assert.equal(res.status, 502);
    assert.deepEqual(await res.json(), { error: 'owner replica unreachable', runtime: 'r1' });
    assert.ok(
      elapsedMs >= CONNECT_TIMEOUT_MS - 10,
      `answered after the timeout, not refused at once (${elapsedMs} ms)`,
    );
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
      Promise.all(Array.from({ length: STREAMS }, () => head(`${frontUrl}/watch`, callers))),
      5000,
      `${STREAMS} event streams forwarded at once`,
    );
    assert.ok(streams.every((s) => s.statusCode === 200 && s.headers[FORWARDED_HEADER] === '1'));
    const answer = await within(head(`${frontUrl}/healthz`, callers), 5000, `a request behind ${STREAMS} streams`);
    assert.equal(answer.statusCode, 200);
    assert.equal(answer.headers[FORWARDED_HEADER], '1');
    callers.destroy();
  });
});
