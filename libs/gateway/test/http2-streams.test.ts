// The gateway's HTTP/2 client for event streams, on real h2c servers over
// loopback, driven through undici's dispatch contract as `exchange` drives
// it: streams share connections up to the cap, bodies flow as they are
// written, a cancelled request resets its stream upstream, and the failures
// the gateway tells apart (connect refused, no HTTP/2, no head in time)
// reach the handler with what it tells them apart by.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http2 from 'node:http2';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import tls from 'node:tls';
import { after, afterEach, describe, it } from 'node:test';
import type { Dispatcher } from 'undici';
import { certificateFor127 } from '@switchyard/service/testing';
import { Http2EventStreams } from '../src/http2-streams.ts';
import { isConnectFailure } from '../src/upstream.ts';
import { until } from './until.ts';

/** What a handler saw of one request, in order. */
interface Recorded {
  controller?: Dispatcher.DispatchController;
  status?: number;
  headers?: Record<string, unknown>;
  chunks: string[];
  ended: boolean;
  error?: Error;
  settled: Promise<void>;
}

function record(): { handler: Dispatcher.DispatchHandler; seen: Recorded } {
  let settle!: () => void;
  const seen: Recorded = { chunks: [], ended: false, settled: new Promise((r) => (settle = r)) };
  const handler: Dispatcher.DispatchHandler = {
    onRequestStart: (c) => void (seen.controller = c),
    onResponseStart: (_c, status, headers) => {
      seen.status = status;
      seen.headers = headers;
    },
    onResponseData: (_c, chunk) => void seen.chunks.push(chunk.toString()),
    onResponseEnd: () => {
      seen.ended = true;
      settle();
    },
    onResponseError: (_c, error) => {
      seen.error = error;
      settle();
    },
  };
  return { handler, seen };
}

const GET = (origin: string, path = '/mcp'): Dispatcher.DispatchOptions => ({
  origin,
  path,
  method: 'GET',
  headers: { accept: 'text/event-stream', 'mcp-session-id': 's1' },
  headersTimeout: 5000,
});

describe('Http2EventStreams', () => {
  const servers: Array<http2.Http2Server | http2.Http2SecureServer | net.Server> = [];
  const clients: Http2EventStreams[] = [];
  const client = (streamsPerConnection = 100, idleTimeoutMs = 60_000, pingIntervalMs = 60_000): Http2EventStreams => {
    const c = new Http2EventStreams({ streamsPerConnection, connectTimeoutMs: 2000, idleTimeoutMs, pingIntervalMs });
    clients.push(c);
    return c;
  };
  /** An h2c server; `onStream` answers each stream, the sessions it saw are counted. */
  async function h2c(
    onStream: (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => void,
    settings: http2.Settings = {},
  ) {
    const server = http2.createServer({ settings });
    const sessions = new Set<http2.ServerHttp2Session>();
    server.on('session', (s) => sessions.add(s));
    server.on('stream', (stream, headers) => {
      // A stream the test resets errors on this side too.
      stream.on('error', () => {});
      onStream(stream, headers);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    servers.push(server);
    return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, sessions };
  }
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
  });
  after(async () => {
    for (const s of servers) s.close();
  });

  it('sends the request headers, relays the head without pseudo-headers and each event as it is written', async () => {
    let seenHeaders: http2.IncomingHttpHeaders | undefined;
    let upstream: http2.ServerHttp2Stream | undefined;
    const { origin } = await h2c((stream, headers) => {
      seenHeaders = headers;
      upstream = stream;
      stream.respond({ ':status': 200, 'content-type': 'text/event-stream' });
      stream.write('data: one\n\n');
    });
    const { handler, seen } = record();
    client().dispatch(GET(origin), handler);
    await until(() => seen.chunks.length === 1, 'the first event arrives while the stream stays open');
    assert.equal(seen.status, 200);
    assert.deepEqual(
      Object.keys(seen.headers ?? {}).filter((k) => k.startsWith(':')),
      [],
    );
    assert.equal(seen.headers?.['content-type'], 'text/event-stream');
    assert.equal(seenHeaders?.[':method'], 'GET');
    assert.equal(seenHeaders?.[':path'], '/mcp');
    assert.equal(seenHeaders?.['mcp-session-id'], 's1');
    upstream!.end('data: two\n\n');
    await seen.settled;
    assert.deepEqual(seen.chunks, ['data: one\n\n', 'data: two\n\n']);
    assert.equal(seen.ended, true);
    assert.equal(seen.error, undefined);
  });

  // A front that routes or checks by :scheme (RFC 9113 §8.3.1: the target URI's) must see https on TLS.
  const certificate = certificateFor127();
  it(
    'says :scheme https on an https: origin (ALPN h2), http on an h2c one',
    { skip: 'missing' in certificate && certificate.missing },
    async () => {
      if ('missing' in certificate) return;
      const schemes: Array<string | undefined> = [];
      const answer = (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void => {
        schemes.push(headers[':scheme']);
        stream.respond({ ':status': 200 });
        stream.end();
      };
      const secure = http2.createSecureServer({ ...certificate, settings: {} });
      secure.on('stream', answer);
      secure.listen(0, '127.0.0.1');
      await once(secure, 'listening');
      servers.push(secure);
      const plain = await h2c(answer);
      const defaults = tls.getCACertificates('default');
      tls.setDefaultCACertificates([...defaults, certificate.cert]);
      try {
        for (const origin of [`https://127.0.0.1:${(secure.address() as AddressInfo).port}`, plain.origin]) {
          const { handler, seen } = record();
          client().dispatch(GET(origin), handler);
          await seen.settled;
          assert.equal(seen.status, 200, String(seen.error));
        }
      } finally {
        tls.setDefaultCACertificates(defaults);
      }
      assert.deepEqual(schemes, ['https', 'http']);
    },
  );

  it('opens many streams on one connection, and a second one past the cap', async () => {
    const { origin, sessions } = await h2c((stream) => stream.respond({ ':status': 200 }));
    const c = client(3);
    const requests = Array.from({ length: 4 }, () => record());
    for (const r of requests) c.dispatch(GET(origin), r.handler);
    await until(() => requests.every((r) => r.seen.status === 200), 'every stream gets its head');
    assert.equal(sessions.size, 2, 'three streams on the first connection, the fourth on a second');
  });

  it('keeps to a lower stream limit the peer announces', async () => {
    const { origin, sessions } = await h2c((stream) => stream.respond({ ':status': 200 }), {
      maxConcurrentStreams: 2,
    });
    const c = client(100);
    const first = [record(), record()];
    for (const r of first) c.dispatch(GET(origin), r.handler);
    await until(() => first.every((r) => r.seen.status === 200), 'the first two streams get their heads');
    const third = record();
    c.dispatch(GET(origin), third.handler);
    await until(() => third.seen.status === 200, 'a third stream, past the peer limit, is answered too');
    assert.equal(sessions.size, 2, 'the third stream went to a second connection');
  });

  it('resets the upstream stream with CANCEL when the request is aborted, and reports the reason', async () => {
    let upstream: http2.ServerHttp2Stream | undefined;
    const { origin } = await h2c((stream) => {
      upstream = stream;
      stream.respond({ ':status': 200, 'content-type': 'text/event-stream' });
    });
    const { handler, seen } = record();
    client().dispatch(GET(origin), handler);
    await until(() => seen.status === 200, 'the head arrives');
    const reason = new Error('client disconnected');
    seen.controller!.abort(reason);
    await seen.settled;
    assert.equal(seen.error, reason);
    assert.equal(seen.controller!.aborted, true);
    await once(upstream!, 'close');
    assert.equal(upstream!.rstCode, http2.constants.NGHTTP2_CANCEL);
  });

  it('once closed, fails a request at once without connecting', async () => {
    const { origin, sessions } = await h2c((stream) => stream.respond({ ':status': 200 }));
    const c = client();
    await c.close();
    // A request still being routed when the gateway closed: a session opened now would be closed by nothing.
    const { handler, seen } = record();
    // Thrown as undici's closed clients throw; exchange hands it to the handler as the request's failure.
    assert.throws(() => c.dispatch(GET(origin), handler), /closed/);
    assert.equal(seen.controller, undefined, 'the request never started');
    // Another client's request, answered: a connection the closed client had begun would have come first.
    const other = record();
    client().dispatch(GET(origin), other.handler);
    await until(() => other.seen.status === 200, "the other client's answer");
    assert.equal(sessions.size, 1, 'no connection of the closed client');
  });

  it('sends nothing for a request aborted as it starts', async () => {
    const { origin, sessions } = await h2c((stream) => stream.respond({ ':status': 200 }));
    const { handler, seen } = record();
    const reason = new Error('client left before');
    client().dispatch(GET(origin), { ...handler, onRequestStart: (c) => c.abort(reason) });
    await seen.settled;
    assert.equal(seen.error, reason);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(sessions.size, 0, 'no connection was needed');
  });

  it('holds the body while paused and delivers it on resume', async () => {
    const { origin } = await h2c((stream) => {
      stream.respond({ ':status': 200 });
      stream.end('held');
    });
    const { handler, seen } = record();
    client().dispatch(GET(origin), { ...handler, onResponseStart: (c, status) => ((seen.status = status), c.pause()) });
    await until(() => seen.status === 200, 'the head arrives');
    await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(seen.chunks, [], 'nothing while paused');
    assert.equal(seen.controller!.paused, true);
    seen.controller!.resume();
    await seen.settled;
    assert.deepEqual(seen.chunks, ['held']);
  });

  it('fails a stream reset by the peer, and a refused connection as a connect failure', async () => {
    const { origin } = await h2c((stream) => stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR));
    const reset = record();
    client().dispatch(GET(origin), reset.handler);
    await reset.seen.settled;
    assert.ok(reset.seen.error, 'a reset stream is an error');
    assert.equal(isConnectFailure(reset.seen.error), false, 'sent, so never retried');

    const closed = net.createServer();
    closed.listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const port = (closed.address() as AddressInfo).port;
    closed.close();
    await once(closed, 'close');
    const refused = record();
    client().dispatch(GET(`http://127.0.0.1:${port}`), refused.handler);
    await refused.seen.settled;
    // Node cancels the pending stream, with the socket's error as the cause.
    assert.equal((refused.seen.error?.cause as { code?: string } | undefined)?.code, 'ECONNREFUSED');
    assert.equal(isConnectFailure(refused.seen.error), true, 'nothing was sent: the gateway may dial again');
  });

  it('fails with ERR_HTTP2_ERROR against a peer that answers the preface as HTTP/1.1', async () => {
    const http1 = net.createServer((socket) => {
      socket.once('data', () => socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n'));
    });
    http1.listen(0, '127.0.0.1');
    await once(http1, 'listening');
    servers.push(http1);
    const { handler, seen } = record();
    client().dispatch(GET(`http://127.0.0.1:${(http1.address() as AddressInfo).port}`), handler);
    await seen.settled;
    assert.equal((seen.error as { code?: string }).code, 'ERR_HTTP2_ERROR');
  });

  it('gives up on a head that does not come within headersTimeout', async () => {
    const { origin } = await h2c(() => {});
    const { handler, seen } = record();
    const started = performance.now();
    client().dispatch({ ...GET(origin), headersTimeout: 150 }, handler);
    await seen.settled;
    assert.match(String(seen.error?.message), /headers timeout/);
    assert.ok(performance.now() - started >= 140, 'not before the timeout');
  });

  it('opens a new connection after the peer sent GOAWAY, and closes one left without streams', async () => {
    const { origin, sessions } = await h2c((stream) => {
      stream.respond({ ':status': 200 });
      stream.end();
    });
    const c = client(100, 200);
    const first = record();
    c.dispatch(GET(origin), first.handler);
    await first.seen.settled;
    const [session] = [...sessions];
    session!.goaway();
    await new Promise((r) => setTimeout(r, 50));
    const second = record();
    c.dispatch(GET(origin), second.handler);
    await second.seen.settled;
    assert.equal(second.seen.ended, true);
    assert.equal(sessions.size, 2, 'the second request went to a new connection');
    const [, fresh] = [...sessions];
    await until(() => fresh!.closed || fresh!.destroyed, 'the idle connection closes after idleTimeoutMs');
  });

  it('pings a connection while it carries streams, and keeps it while the pings are answered', async () => {
    let upstream: http2.ServerHttp2Stream | undefined;
    const { origin, sessions } = await h2c((stream) => {
      upstream = stream;
      stream.respond({ ':status': 200, 'content-type': 'text/event-stream' });
    });
    let pings = 0;
    const { handler, seen } = record();
    client(100, 60_000, 20).dispatch(GET(origin), handler);
    await until(() => seen.status === 200 && sessions.size === 1, 'the stream is open');
    [...sessions][0]!.on('ping', () => pings++);
    await new Promise((r) => setTimeout(r, 300));
    assert.ok(pings >= 5, `a silent stream's connection is pinged (${pings} pings in 300 ms at 20 ms)`);
    assert.equal(seen.error, undefined, 'answered pings keep the stream');
    upstream!.end('data: last\n\n');
    await seen.settled;
    assert.equal(seen.ended, true);
    const after = pings;
    await new Promise((r) => setTimeout(r, 100));
    assert.ok(pings - after <= 1, 'a connection without streams is not pinged');
  });

  it('keeps a connection whose ping answer waits unread while this process stood still', async () => {
    const { origin } = await h2c((stream) => {
      stream.respond({ ':status': 200, 'content-type': 'text/event-stream' });
      stream.write('data: one\n\n');
    });
    // The event loop stands still right after a ping is sent, for over three intervals: the answer
    // arrives meanwhile (or the ping only leaves after), and when the loop comes back Node runs the
    // due timers before it reads the socket. The peer answered; this process was not looking.
    const probe = http2.connect(origin);
    probe.on('error', () => {});
    const proto = pingOwner(probe);
    probe.destroy();
    const ping = proto.ping;
    let stalls = 0;
    proto.ping = function (this: http2.Http2Session, ...args: Parameters<typeof ping>) {
      const sent = ping.apply(this, args);
      if (stalls++ === 0) {
        const until = performance.now() + 350;
        while (performance.now() < until);
      }
      return sent;
    } as typeof ping;
    try {
      const { handler, seen } = record();
      client(100, 60_000, 100).dispatch(GET(origin), handler);
      await until(() => seen.chunks.length === 1, 'the stream is open');
      await until(
        () => stalls >= 3 || seen.error !== undefined,
        'two pings after the stall, or the stream failed',
        3000,
      );
      assert.equal(seen.error, undefined, 'a ping answered while this process stood still kept its connection');
    } finally {
      proto.ping = ping;
    }
  });

  it('fails the streams of a connection whose peer stops answering pings', async () => {
    const { origin } = await h2c((stream) => {
      stream.respond({ ':status': 200, 'content-type': 'text/event-stream' });
      stream.write('data: one\n\n');
    });
    // A relay that can go silent both ways without closing anything: a peer
    // whose host vanished, as seen from this side.
    const target = new URL(origin);
    const sockets: net.Socket[] = [];
    const relay = net.createServer((inbound) => {
      const outbound = net.connect(Number(target.port), target.hostname);
      sockets.push(inbound, outbound);
      inbound.pipe(outbound).pipe(inbound);
    });
    relay.listen(0, '127.0.0.1');
    await once(relay, 'listening');
    servers.push(relay);
    const { handler, seen } = record();
    client(100, 60_000, 50).dispatch(GET(`http://127.0.0.1:${(relay.address() as AddressInfo).port}`), handler);
    await until(() => seen.chunks.length === 1, 'the stream is open');
    const frozenAt = performance.now();
    for (const socket of sockets) {
      socket.unpipe();
      socket.pause();
    }
    await seen.settled;
    assert.equal((seen.error as { code?: string } | undefined)?.code, 'ERR_HTTP2_PING_TIMEOUT');
    const took = performance.now() - frozenAt;
    assert.ok(took <= 500, `failed within a few intervals (${took} ms at 50 ms)`);
    for (const socket of sockets) socket.destroy();
  });

  it('puts a request made while a failed connection is still closing on a fresh connection', async () => {
    const { origin, sessions } = await h2c((stream) => {
      stream.respond({ ':status': 200, 'content-type': 'text/event-stream' });
      stream.write('data: one\n\n');
    });
    // As above, a relay whose first connection can be frozen; connections
    // made after the freeze pass.
    const target = new URL(origin);
    const frozen: net.Socket[] = [];
    let freeze = false;
    const relay = net.createServer((inbound) => {
      const outbound = net.connect(Number(target.port), target.hostname);
      if (!freeze) frozen.push(inbound, outbound);
      inbound.pipe(outbound).pipe(inbound);
    });
    relay.listen(0, '127.0.0.1');
    await once(relay, 'listening');
    servers.push(relay);
    const relayed = `http://127.0.0.1:${(relay.address() as AddressInfo).port}`;
    const c = client(100, 60_000, 50);
    const first = record();
    const again = record();
    // The client opens its stream again the moment it fails (the session it
    // was on is destroyed, its 'close' not yet emitted).
    c.dispatch(GET(relayed), {
      ...first.handler,
      onResponseError: (controller, error) => {
        c.dispatch(GET(relayed), again.handler);
        first.handler.onResponseError?.(controller, error);
      },
    });
    try {
      await until(() => first.seen.chunks.length === 1, 'the stream is open');
      freeze = true;
      for (const socket of frozen) {
        socket.unpipe();
        socket.pause();
      }
      await first.seen.settled;
      assert.equal((first.seen.error as { code?: string } | undefined)?.code, 'ERR_HTTP2_PING_TIMEOUT');
      await until(() => again.seen.chunks.length === 1 || again.seen.error !== undefined, 'the second request');
      assert.equal(again.seen.error, undefined, 'not failed on the destroyed session');
      assert.equal(again.seen.status, 200);
      assert.equal(sessions.size, 2, 'it went over a second connection');
    } finally {
      // Frozen sockets would keep the test process alive.
      for (const socket of frozen) socket.destroy();
    }
  });
});

/** The prototype that defines `ping` for client sessions (Http2Session's). */
function pingOwner(session: http2.ClientHttp2Session): { ping: http2.Http2Session['ping'] } {
  let proto: object | null = Object.getPrototypeOf(session) as object;
  while (proto && !Object.hasOwn(proto, 'ping')) proto = Object.getPrototypeOf(proto) as object | null;
  assert.ok(proto, 'no ping on the session prototype chain');
  return proto as { ping: http2.Http2Session['ping'] };
}
