// The gateway's relay connections against real loopback servers standing in
// for a scheduler: one that grants the relay and then serves HTTP/1.1 on the
// upgraded connection itself (as the runtime would behind a real one), one
// that refuses it as a release without relays does (404), and one that is
// not listening. What the routing relies on: which URLs a relay covers, that
// a refusal is told apart from a connect failure and remembered for a while,
// that a granted relay carries many requests on one connection, that relays
// stay few, and that a rotated token moves requests to new relays; and,
// for `https:` scheduler URLs, that the relay is asked for inside verified
// TLS (a TLS front with a certificate made by the openssl CLI for the test).
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import tls from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from '@switchyard/clock/testing';
import type { Dispatcher } from 'undici';
import { RelayConnections } from '../src/relay-connections.ts';
import { certificateFor127 } from '@switchyard/service/testing';
import { isConnectFailure } from '../src/upstream.ts';
import { until } from './until.ts';

/** Sends one POST through `relays` as `exchange` would; resolves with the status and body, or the error (thrown or failing the request). */
function post(relays: RelayConnections, url: string): Promise<{ status?: number; body?: string; error?: Error }> {
  return new Promise((resolve) => {
    const slash = url.indexOf('/', url.indexOf('//') + 2);
    const chunks: Buffer[] = [];
    let status = 0;
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart: () => {},
      onResponseStart: (_c, statusCode) => void (status = statusCode),
      onResponseData: (_c, chunk) => void chunks.push(chunk),
      onResponseEnd: () => resolve({ status, body: Buffer.concat(chunks).toString('utf8') }),
      onResponseError: (_c, error) => resolve({ error }),
    };
    try {
      relays.dispatch({ origin: url.slice(0, slash), path: url.slice(slash), method: 'POST', body: '{}' }, handler);
    } catch (error) {
      resolve({ error: error as Error });
    }
  });
}

async function listen(server: net.Server, scheme = 'http'): Promise<string> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `${scheme}://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
}

describe('relay connections from the gateway', () => {
  const clock = new ManualClock();
  const refusals: string[] = [];
  const relays = new RelayConnections({
    keepAliveTimeout: 4000,
    connectTimeout: 2000,
    clock,
    onRefused: (relay) => refusals.push(relay),
  });
  const asked: string[] = [];
  const connections = new Set<net.Socket>();
  /** The connection of the last answer sent. */
  let lastAnswered: net.Socket | undefined;
  /** Answers to requests whose path has `hold` in it, sent when the test says. */
  const held: (() => void)[] = [];
  /** Grants every relay; the upgraded connection is served by `inner` (the stand-in runtime). */
  const inner = http.createServer((req, res) => {
    connections.add(req.socket);
    req.resume();
    const answer = (): void => {
      lastAnswered = req.socket;
      res.end(`${req.method} ${req.url}`);
    };
    req.once('end', () => (req.url?.includes('hold') ? held.push(answer) : answer()));
  });
  const granting = http.createServer((_req, res) => res.writeHead(500).end());
  /** Each relay granted, with the Authorization it was asked with. */
  const granted: { authorization: string | undefined; socket: net.Socket }[] = [];
  granting.on('upgrade', (req, socket: net.Socket) => {
    asked.push(`${req.url} ${req.headers.upgrade}`);
    granted.push({ authorization: req.headers.authorization, socket });
    socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: switchyard-relay\r\n\r\n');
    inner.emit('connection', socket);
  });
  const refusing = http.createServer((_req, res) => res.writeHead(500).end());
  refusing.on('upgrade', (_req, socket: net.Socket) => {
    socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
  });
  let grantingUrl = '';
  let refusingUrl = '';
  before(async () => {
    grantingUrl = await listen(granting);
    refusingUrl = await listen(refusing);
  });
  after(async () => {
    await relays.close();
    for (const server of [granting, refusing]) {
      server.closeAllConnections();
      server.close();
    }
  });

  it('covers scheduler proxy URLs only', () => {
    assert.equal(relays.covers('http://s:7070/api/proxy/rt-1/mcp'), true);
    assert.equal(relays.covers('https://s:7070/api/proxy/rt-1/mcp'), true);
    assert.equal(relays.covers('wss://s:7070/api/proxy/rt-1/mcp'), false);
    assert.equal(relays.covers('http://s:7070/mcp'), false);
    assert.equal(relays.covers('http://s:7070/api/proxy/'), false);
  });

  it('asks for /api/relay/<runtime> and sends request after request on its connections, path past the runtime', async () => {
    const requests = 6;
    for (let n = 0; n < requests; n++) {
      assert.deepEqual(await post(relays, `${grantingUrl}/api/proxy/rt-1/mcp?n=${n}`), {
        status: 200,
        body: `POST /mcp?n=${n}`,
      });
    }
    // undici marks a connection free a moment after its answer's end, so a
    // request sent at once may open a second one; after that they are reused.
    assert.ok(asked.length <= 2, `relays asked for: ${asked.length}`);
    assert.ok(
      asked.every((a) => a === '/api/relay/rt-1 switchyard-relay'),
      asked.join(),
    );
    assert.equal(connections.size, asked.length, 'each relay carried requests to the stand-in runtime');
  });

  it('fails a refused relay with an error `refused` knows (not a connect failure), and skips it for 30 s', async () => {
    const url = `${refusingUrl}/api/proxy/rt-2/mcp`;
    const { error } = await post(relays, url);
    assert.ok(error);
    assert.equal(isConnectFailure(error), false);
    assert.equal(relays.refused(url, error), true);
    assert.equal(relays.covers(url), false);
    // A second request failed by the same refusal (queued on the same connection) is no news.
    assert.equal(relays.refused(url, error), true);
    assert.deepEqual(refusals, [`${refusingUrl}/api/relay/rt-2`]);
    assert.equal(relays.covers(`${refusingUrl}/api/proxy/rt-3/mcp`), true, 'another runtime is not affected');
    await clock.advance(30_001);
    assert.equal(relays.covers(url), true);
  });

  it('forgets expired refusals once it remembers 1,024 relays, when another is refused', async () => {
    const { error } = await post(relays, `${refusingUrl}/api/proxy/rt-sweep/mcp`);
    const own = new RelayConnections({ keepAliveTimeout: 4000, connectTimeout: 2000, clock });
    try {
      for (let n = 0; n < 1024; n++) own.refused(`${refusingUrl}/api/proxy/gone-${n}/mcp`, error);
      assert.equal(own.refusalsRemembered, 1024);
      await clock.advance(30_001);
      assert.equal(own.refusalsRemembered, 1024, 'expired, not yet swept');
      own.refused(`${refusingUrl}/api/proxy/new-1/mcp`, error);
      assert.equal(own.refusalsRemembered, 1, 'the expired 1,024 swept, the new one kept');
      assert.equal(own.covers(`${refusingUrl}/api/proxy/new-1/mcp`), false);
      assert.equal(own.covers(`${refusingUrl}/api/proxy/gone-0/mcp`), true);
    } finally {
      await own.close();
    }
  });

  it('covers a relay only while fewer than relaysPerRuntime requests are in flight on it, so idle relays stay few', async () => {
    let limitReached = 0;
    const capped = new RelayConnections({
      keepAliveTimeout: 4000,
      connectTimeout: 2000,
      clock,
      relaysPerRuntime: 2,
      onLimit: () => limitReached++,
    });
    const url = `${grantingUrl}/api/proxy/rt-capped/hold`;
    const before = asked.length;
    try {
      assert.equal(capped.covers(url), true);
      const first = post(capped, url);
      const second = post(capped, url);
      assert.equal(capped.inFlight(url), 2);
      assert.equal(capped.covers(url), false, 'two in flight: the next goes through /api/proxy');
      assert.equal(limitReached, 1, 'each request turned away is told of');
      // A request dispatched without asking (a connect retry) fails before it leaves, to go through /api/proxy.
      const remembered = capped.refusalsRemembered;
      const third = await post(capped, url);
      assert.match(String(third.error), /carry 2 requests already/);
      assert.equal(capped.refused(url, third.error), true);
      assert.equal(capped.refusalsRemembered, remembered, 'not remembered as a refusal');
      assert.equal(limitReached, 2);
      assert.equal(capped.inFlight(url), 2);
      assert.equal(capped.covers(`${grantingUrl}/api/proxy/rt-other/hold`), true, 'another runtime is not affected');
      await until(() => held.length === 2, 'both requests at the stand-in runtime');
      // The two went on two relays: either may have reached the stand-in first.
      held.shift()!();
      const done = await Promise.race([first, second]);
      assert.deepEqual(done, { status: 200, body: 'POST /hold' });
      assert.equal(capped.inFlight(url), 1);
      assert.equal(capped.covers(url), true);
      assert.equal(limitReached, 2);
      held.shift()!();
      assert.deepEqual(await Promise.all([first, second]), [done, done]);
      assert.equal(capped.inFlight(url), 0);
      assert.equal(asked.length - before, 2, 'one relay per request in flight, no more');
      // A request that fails is no longer in flight either.
      const refusedUrl = `${refusingUrl}/api/proxy/rt-capped/mcp`;
      const { error } = await post(capped, refusedUrl);
      assert.ok(error);
      assert.equal(capped.inFlight(refusedUrl), 0);
    } finally {
      await capped.close();
    }
  });

  it('moves to relays presenting a changed token, and closes the earlier ones once their requests have ended', async () => {
    let token = 'Bearer token-one-0123456789';
    const rotating = new RelayConnections({
      keepAliveTimeout: 4000,
      connectTimeout: 2000,
      clock,
      authorization: () => token,
    });
    const url = `${grantingUrl}/api/proxy/rt-rotating/hold`;
    const from = granted.length;
    try {
      const long = post(rotating, url);
      await until(() => held.length === 1, 'the first request at the stand-in runtime');
      const first = granted[from]!;
      assert.equal(first.authorization, 'Bearer token-one-0123456789');

      token = 'Bearer token-two-0123456789';
      const next = post(rotating, url);
      await until(() => held.length === 2, 'the second request at the stand-in runtime');
      assert.deepEqual(
        granted.slice(from).map((g) => g.authorization),
        ['Bearer token-one-0123456789', 'Bearer token-two-0123456789'],
        'the second request rode a new relay presenting the new token',
      );
      assert.equal(rotating.closing, 1);
      assert.equal(first.socket.destroyed, false, 'the earlier relay stays while its request is in flight');

      held.shift()!();
      assert.deepEqual(await long, { status: 200, body: 'POST /hold' }, 'the request in flight ends normally');
      await until(() => first.socket.destroyed, 'the earlier relay closes once idle', 1500);
      await until(() => rotating.closing === 0, 'the earlier pool forgotten');
      held.shift()!();
      assert.deepEqual(await next, { status: 200, body: 'POST /hold' });
      assert.equal(granted[from + 1]!.socket.destroyed, false, 'the relay of the current token is kept');
      assert.equal(granted.length - from, 2, 'no relay dialled but those two');
    } finally {
      await rotating.close();
    }
  });

  it('sheds the relays of a runtime whose tunnel is full: the idle ones at once, the busy ones after their answer', async () => {
    const own = new RelayConnections({ keepAliveTimeout: 4000, connectTimeout: 2000, clock });
    const url = `${grantingUrl}/api/proxy/rt-shed/hold`;
    const from = granted.length;
    try {
      // Two relays: one left idle, one holding a request.
      const both = [post(own, url), post(own, url)];
      await until(() => held.length === 2, 'two requests at the stand-in runtime');
      held.shift()!();
      const left = await Promise.race(both.map((p, i) => p.then(() => 1 - i)));
      assert.equal(granted.length - from, 2);
      const idle = granted.slice(from).find((g) => g.socket === lastAnswered)!;
      const busy = granted.slice(from).find((g) => g !== idle)!;

      // Well before the stand-in's keep-alive (5 s) would have undici close them anyway.
      own.shed(url);
      await until(() => idle.socket.destroyed, 'the idle relay closes at once', 1500);
      assert.equal(busy.socket.destroyed, false, 'the busy relay stays while its request is in flight');
      assert.equal(own.closing, 1);
      held.shift()!();
      assert.deepEqual(await both[left], { status: 200, body: 'POST /hold' }, 'the request in flight ends normally');
      await until(() => busy.socket.destroyed, 'the busy relay closes after its answer', 1500);
      await until(() => own.closing === 0, 'the shed pool forgotten');

      const later = post(own, url);
      await until(() => held.length === 1, 'a later request at the stand-in runtime');
      held.shift()!();
      assert.deepEqual(await later, { status: 200, body: 'POST /hold' });
      assert.equal(granted.length - from, 3, 'a later request dials a new relay');
    } finally {
      await own.close();
    }
  });

  it('reports a scheduler that is not listening as a connect failure, not a refusal', async () => {
    const probe = net.createServer();
    probe.listen(0, '127.0.0.1');
    await once(probe, 'listening');
    const port = (probe.address() as net.AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    const url = `http://127.0.0.1:${port}/api/proxy/rt-4/mcp`;
    const { error } = await post(relays, url);
    assert.equal(isConnectFailure(error), true, String(error));
    assert.equal(relays.refused(url, error), false);
  });

  it('asks for the relay inside TLS on https: URLs, and only with a certificate it trusts', async (t) => {
    const certificate = certificateFor127();
    if ('missing' in certificate) return t.skip(certificate.missing);
    // A TLS front as a proxy ending TLS before the scheduler would be.
    const front = tls.createServer(certificate, (socket) => granting.emit('connection', socket));
    const frontUrl = await listen(front, 'https');
    const defaults = tls.getCACertificates('default');
    try {
      const url = `${frontUrl}/api/proxy/rt-5/mcp`;
      const untrusted = await post(relays, url);
      assert.match(String((untrusted.error as { code?: string } | undefined)?.code), /SELF_SIGNED/);
      assert.equal(relays.refused(url, untrusted.error), false, 'a certificate failure is no refusal');
      tls.setDefaultCACertificates([...defaults, certificate.cert]);
      assert.deepEqual(await post(relays, url), { status: 200, body: 'POST /mcp' });
      assert.equal(asked.at(-1), '/api/relay/rt-5 switchyard-relay');
      assert.ok(
        [...connections].some((socket) => socket instanceof tls.TLSSocket),
        'the relay ran inside TLS',
      );
    } finally {
      tls.setDefaultCACertificates(defaults);
      front.close();
    }
  });

  it('dials a relay for each request at once on https: URLs, none waiting for the first to learn its protocol', async (t) => {
    const certificate = certificateFor127();
    if ('missing' in certificate) return t.skip(certificate.missing);
    // Holds the answers to relay requests until three are asked (or a second has passed).
    const waiting: net.Socket[] = [];
    let askedBeforeAnAnswer = 0;
    const grant = (socket: net.Socket): void => {
      socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: switchyard-relay\r\n\r\n');
      inner.emit('connection', socket);
    };
    const release = (): void => {
      clearTimeout(timer);
      if (askedBeforeAnAnswer === 0) askedBeforeAnAnswer = waiting.length;
      for (const socket of waiting.splice(0)) grant(socket);
    };
    const timer = setTimeout(release, 1000);
    const holding = http.createServer((_req, res) => res.writeHead(500).end());
    holding.on('upgrade', (_req, socket: net.Socket) => {
      if (askedBeforeAnAnswer > 0) return grant(socket);
      waiting.push(socket);
      if (waiting.length === 3) release();
    });
    const front = tls.createServer(certificate, (socket) => holding.emit('connection', socket));
    const frontUrl = await listen(front, 'https');
    const defaults = tls.getCACertificates('default');
    tls.setDefaultCACertificates([...defaults, certificate.cert]);
    try {
      const url = `${frontUrl}/api/proxy/rt-6/mcp`;
      const replies = await Promise.all([1, 2, 3].map(() => post(relays, url)));
      for (const reply of replies) assert.deepEqual(reply, { status: 200, body: 'POST /mcp' });
      assert.equal(askedBeforeAnAnswer, 3, 'relays asked for before the first was granted');
    } finally {
      clearTimeout(timer);
      tls.setDefaultCACertificates(defaults);
      front.close();
    }
  });

  it('once closed, covers no URL and fails a request at once without dialling', async () => {
    const closed = new RelayConnections({ keepAliveTimeout: 4000, connectTimeout: 2000, clock });
    await closed.close();
    const url = `${grantingUrl}/api/proxy/rt-7/mcp`;
    assert.equal(closed.covers(url), false);
    const before = asked.length;
    const { error } = await post(closed, url);
    assert.match(String(error), /closed/);
    assert.equal(asked.length, before, 'no relay asked for');
  });
});
