import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import { WebSocketServer } from 'ws';
import { ManualClock } from '@switchyard/clock/testing';
import { certificateFor127, startTlsFront } from '@switchyard/service/testing';
import { dialTunnel } from '../src/index.ts';
import type { TunnelDialer, TunnelTransport } from '../src/index.ts';
import { captureLogger, readStream, runtimeInfo, startScheduler, TOKEN, until } from './helpers.ts';
import type { Scheduler } from './helpers.ts';
import type { RuntimeInfo } from '@switchyard/protocol';

describe('tunnel dialer', () => {
  const open: { dialers: TunnelDialer[]; schedulers: Scheduler[] } = { dialers: [], schedulers: [] };
  afterEach(async () => {
    for (const d of open.dialers.splice(0)) void d.close();
    for (const s of open.schedulers.splice(0)) await s.close();
  });

  it('reconnects with backoff after the scheduler restarts on the same port', async () => {
    const first = await startScheduler();
    open.schedulers.push(first);
    const events: string[] = [];
    const accepted = first.nextTunnel('rt-re');
    const dialer = dialTunnel({
      url: first.url,
      token: TOKEN,
      info: runtimeInfo('rt-re'),
      handler: (_req, res) => res.end('back'),
      backoff: { initialMs: 20, maxMs: 200 },
      onConnected: () => events.push('up'),
      onDisconnected: (reason) => events.push(`down: ${reason}`),
    });
    open.dialers.push(dialer);
    await accepted;
    await until(() => dialer.connected);

    await first.close();
    await until(() => !dialer.connected);
    const second = await startScheduler({}, first.port);
    open.schedulers.push(second);
    const tunnel = await second.nextTunnel('rt-re');
    await until(() => dialer.connected);
    assert.deepEqual((await readStream(tunnel.request({ ':path': '/' }))).body, 'back');
    assert.equal(events[0], 'up');
    assert.match(events[1] ?? '', /^down: /);
    assert.equal(events.at(-1), 'up');
  });

  // perDial: connect requests one dial makes. `auto` dials WebSocket after a refused http2 upgrade, except
  // for refusals no transport changes (401, 431, 503).
  const refusals: {
    name: string;
    token: string;
    status: number;
    badInfo?: Partial<RuntimeInfo>;
    transport: TunnelTransport;
    perDial: number;
    /** What the logged body must say. */
    says?: RegExp;
  }[] = [
    {
      name: 'a 401 refusal is logged with status and body and retried at the maximum delay',
      token: 'wrong',
      status: 401,
      transport: 'auto',
      perDial: 1,
    },
    {
      name: 'a 400 refusal is logged and retried at the maximum delay, after trying WebSocket too',
      token: TOKEN,
      status: 400,
      badInfo: { classes: [] },
      transport: 'auto',
      perDial: 2,
    },
    {
      name: 'a 400 refusal of a runtime dialing only http2 is logged and retried at the maximum delay',
      token: TOKEN,
      status: 400,
      badInfo: { classes: [] },
      transport: 'http2',
      perDial: 1,
    },
    {
      name: 'a 400 refusal of a version no latest_version rule ranks is logged naming the field and the rule',
      token: TOKEN,
      status: 400,
      badInfo: { version: 'banana' },
      transport: 'http2',
      perDial: 1,
      says: /"field":"X-Runtime-Info\.version".*must be a semantic version/,
    },
  ];
  for (const c of refusals) {
    it(c.name, async () => {
      const scheduler = await startScheduler();
      open.schedulers.push(scheduler);
      const clock = new ManualClock();
      const { logger, lines } = captureLogger();
      const info = { ...runtimeInfo('x'), ...c.badInfo };
      const dialer = dialTunnel({
        url: scheduler.url,
        token: c.token,
        info,
        handler: (_req, res) => res.end(),
        clock,
        logger,
        random: () => 0,
        backoff: { initialMs: 100, maxMs: 5000 },
        transport: c.transport,
      });
      open.dialers.push(dialer);
      // Every connect is refused here; counted as they arrive (the scheduler logs a reason once per interval).
      const refused = (): number => scheduler.connects.count;
      await until(() => lines.some((l) => l.level === 'error'));
      const error = lines.find((l) => l.level === 'error')!.obj as { status: number; body: string };
      assert.equal(error.status, c.status);
      assert.match(error.body, /"error"/);
      if (c.says) assert.match(error.body, c.says);
      assert.doesNotMatch(JSON.stringify(lines), new RegExp(TOKEN));
      await until(() => clock.pendingTimers === 1);
      await clock.advance(4999);
      assert.equal(refused(), c.perDial, 'no retry before the maximum delay');
      await clock.advance(1);
      await until(() => refused() === 2 * c.perDial);
      assert.equal(dialer.connected, false);
    });
  }

  it('dials again at once, not at the maximum delay, once a token refused with 401 changes', async () => {
    const scheduler = await startScheduler();
    open.schedulers.push(scheduler);
    const clock = new ManualClock();
    const { logger, lines } = captureLogger();
    let token = 'wrong';
    let asked = 0;
    const dialer = dialTunnel({
      url: scheduler.url,
      token: () => (asked++, token),
      info: runtimeInfo('rt-rotated'),
      handler: (_req, res) => res.end(),
      clock,
      logger,
      random: () => 0,
      backoff: { initialMs: 100, maxMs: 60_000 },
      pingIntervalMs: 600_000,
    });
    open.dialers.push(dialer);
    await until(() => lines.some((l) => l.level === 'error'));
    await clock.advance(3000);
    assert.equal(asked, 4, 'asked at the dial, then once a second');
    assert.equal(dialer.connected, false);
    const accepted = scheduler.nextTunnel('rt-rotated');
    token = TOKEN;
    await clock.advance(1000);
    await accepted;
    await until(() => dialer.connected);
    assert.ok(lines.some((l) => l.msg === 'join token changed; dialling again'));
    await clock.advance(60_000);
    assert.equal(asked, 6, 'the redial asked once more; nothing asks while connected');
  });

  // A scheduler of an older release, or a proxy in front of it that passes WebSocket upgrades only.
  const webSocketOnly = [
    {
      name: 'answers 400',
      refuse: (socket: Duplex) => socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n'),
    },
    { name: 'drops the connection', refuse: (socket: Duplex) => socket.destroy() },
  ];
  for (const peer of webSocketOnly) {
    it(`falls back to WebSocket in the same dial when a peer that takes WebSocket only ${peer.name}`, async () => {
      const scheduler = await startScheduler();
      open.schedulers.push(scheduler);
      scheduler.server.removeAllListeners('upgrade');
      scheduler.server.on('upgrade', (req, socket, head) =>
        req.headers.upgrade === 'websocket' ? scheduler.endpoint.handleUpgrade(req, socket, head) : peer.refuse(socket),
      );
      const clock = new ManualClock();
      const { logger, lines } = captureLogger();
      const accepted = scheduler.nextTunnel('rt-fallback');
      const dialer = dialTunnel({
        url: scheduler.url,
        token: TOKEN,
        info: runtimeInfo('rt-fallback'),
        handler: (_req, res) => res.end('over websocket'),
        clock,
        logger,
      });
      open.dialers.push(dialer);
      const tunnel = await accepted;
      assert.equal(tunnel.transport, 'websocket');
      assert.equal((await readStream(tunnel.request({ ':path': '/' }))).body, 'over websocket');
      assert.deepEqual(
        lines.map((l) => `${l.level} ${l.msg}`),
        ['info http2 upgrade not taken; dialing WebSocket', 'info tunnel connected'],
      );
      assert.equal(clock.pendingTimers, 1, 'no redial was scheduled, only the heartbeat');
    });
  }

  // A runtime on a private node dials the scheduler on an https: URL, TLS
  // ended by an ingress in front of it. Inside TLS the socket carries ALPN's
  // verdict (HTTP/1.1 or none), which Node's HTTP/2 server would go by; the
  // upgrade, not ALPN, decides what runs after the 101.
  const certificate = certificateFor127();
  for (const transport of ['http2', 'websocket'] as const) {
    it(
      `dials an https: URL through a TLS-ending front (${transport})`,
      { skip: 'missing' in certificate && certificate.missing },
      async () => {
        if ('missing' in certificate) return;
        const scheduler = await startScheduler();
        open.schedulers.push(scheduler);
        const front = await startTlsFront(certificate, scheduler.port);
        const defaults = tls.getCACertificates('default');
        tls.setDefaultCACertificates([...defaults, certificate.cert]);
        const accepted = scheduler.nextTunnel(`rt-tls-${transport}`);
        const dialer = dialTunnel({
          url: front.url,
          token: TOKEN,
          info: runtimeInfo(`rt-tls-${transport}`),
          handler: (_req, res) => res.end('inside TLS'),
          transport,
        });
        try {
          const tunnel = await accepted;
          assert.equal(tunnel.transport, transport);
          for (let i = 0; i < 3; i++) {
            assert.deepEqual(await readStream(tunnel.request({ ':path': '/' })), { status: 200, body: 'inside TLS' });
          }
          assert.equal(dialer.connected, true);
        } finally {
          void dialer.close();
          tls.setDefaultCACertificates(defaults);
          await front.close();
        }
      },
    );
  }

  it('does not fall back when told to dial http2 only', async () => {
    const scheduler = await startScheduler();
    open.schedulers.push(scheduler);
    scheduler.server.removeAllListeners('upgrade');
    const asked: string[] = [];
    scheduler.server.on('upgrade', (req, socket, head) => {
      asked.push(req.headers.upgrade ?? '');
      if (req.headers.upgrade === 'websocket') scheduler.endpoint.handleUpgrade(req, socket, head);
      else socket.destroy();
    });
    const clock = new ManualClock();
    const dialer = dialTunnel({
      url: scheduler.url,
      token: TOKEN,
      info: runtimeInfo('rt-h2-only'),
      handler: (_req, res) => res.end(),
      clock,
      transport: 'http2',
    });
    open.dialers.push(dialer);
    // The failed dial leaves one timer: the redial.
    await until(() => clock.pendingTimers === 1);
    assert.deepEqual(asked, ['switchyard-tunnel']);
    assert.equal(dialer.connected, false);
    assert.deepEqual(scheduler.endpoint.list(), []);
  });

  it('says a scheduler it cannot reach is unreachable at the first failed dial and every tenth after', async () => {
    const clock = new ManualClock();
    const { logger, lines } = captureLogger();
    const dialer = dialTunnel({
      // Nothing listens on port 1: every dial is refused at once.
      url: 'http://127.0.0.1:1',
      token: TOKEN,
      info: runtimeInfo('rt-nowhere'),
      handler: (_req, res) => res.end(),
      clock,
      random: () => 0,
      backoff: { initialMs: 10, maxMs: 10 },
      logger,
    });
    const unreachable = () => lines.filter((l) => l.msg === 'scheduler unreachable; dialling again');
    try {
      for (let dials = 1; dials <= 11; dials++) {
        await until(() => clock.pendingTimers === 1);
        if (dials < 11) await clock.advance(10);
      }
      assert.deepEqual(
        unreachable().map((l) => [l.level, (l.obj as { attempt: number }).attempt]),
        [
          ['warn', 1],
          ['warn', 11],
        ],
      );
      assert.match(String((unreachable()[0]!.obj as { reason: string }).reason), /ECONNREFUSED/);
    } finally {
      void dialer.close();
    }
  });

  it('says a scheduler it lost is unreachable at the first failed redial, not nine redials later', async () => {
    const scheduler = await startScheduler();
    open.schedulers.push(scheduler);
    const manual = new ManualClock();
    // Counts the timers set: while no tunnel is up, the only one is the next dial's (heartbeats are off).
    let timersSet = 0;
    const clock = {
      now: () => manual.now(),
      monotonicNow: () => manual.monotonicNow(),
      setTimeout: (fn: () => void, ms: number) => (timersSet++, manual.setTimeout(fn, ms)),
    };
    const { logger, lines } = captureLogger();
    const accepted = scheduler.nextTunnel('rt-lost');
    const dialer = dialTunnel({
      url: scheduler.url,
      token: TOKEN,
      info: runtimeInfo('rt-lost'),
      handler: (_req, res) => res.end(),
      clock,
      random: () => 0,
      backoff: { initialMs: 10, maxMs: 10 },
      logger,
    });
    open.dialers.push(dialer);
    const unreachable = () => lines.filter((l) => l.msg === 'scheduler unreachable; dialling again');
    try {
      await accepted;
      await until(() => dialer.connected);
      // Nothing listens on its port any more: the redial after the disconnect is refused at once.
      await scheduler.close();
      await until(() => !dialer.connected && manual.pendingTimers === 1);
      const before = timersSet;
      await manual.advance(10);
      // The redial failed once the dial after it is set.
      await until(() => timersSet > before);
      assert.deepEqual(
        unreachable().map((l) => [l.level, (l.obj as { attempt: number }).attempt]),
        [['warn', 1]],
      );
      assert.match(String((unreachable()[0]!.obj as { reason: string }).reason), /ECONNREFUSED/);
    } finally {
      void dialer.close();
    }
  });

  it('moves on to its fallback URLs, in order, when a dial fails', async () => {
    const scheduler = await startScheduler();
    open.schedulers.push(scheduler);
    const clock = new ManualClock();
    const { logger, lines } = captureLogger();
    const accepted = scheduler.nextTunnel('rt-fallback');
    // Two replicas that refuse connections (nothing listens on ports 1 and 2), then a live one.
    const dialer = dialTunnel({
      url: 'http://127.0.0.1:1',
      fallbackUrls: ['http://127.0.0.1:2', scheduler.url],
      token: TOKEN,
      info: runtimeInfo('rt-fallback'),
      handler: (_req, res) => res.end(),
      clock,
      random: () => 0,
      backoff: { initialMs: 10, maxMs: 10 },
      logger,
    });
    try {
      for (let failed = 1; failed <= 2; failed++) {
        await until(() => clock.pendingTimers === 1);
        await clock.advance(10);
      }
      await accepted;
      await until(() => dialer.connected);
      const tried = lines.filter((l) => l.msg === 'scheduler unreachable; dialling again').map((l) => l.obj);
      assert.deepEqual(
        tried.map((o) => (o as { url: string }).url),
        ['http://127.0.0.1:1/api/runtime/connect'],
        'the first failed dial is said, naming the URL it dialled',
      );
      const connected = lines.find((l) => l.msg === 'tunnel connected')!.obj as { url: string };
      assert.equal(connected.url, `${scheduler.url}/api/runtime/connect`);
    } finally {
      void dialer.close();
    }
  });

  it('gives up a dial that a frozen replica never answers, and moves on to its fallback URL', async () => {
    // A replica that takes connections (the kernel does, for a SIGSTOPped process) and answers nothing.
    const frozen = http.createServer(() => {});
    frozen.on('upgrade', () => {});
    let reached = 0;
    frozen.on('connection', () => reached++);
    frozen.listen(0, '127.0.0.1');
    await once(frozen, 'listening');
    const scheduler = await startScheduler();
    open.schedulers.push(scheduler);
    const clock = new ManualClock();
    const accepted = scheduler.nextTunnel('rt-frozen');
    const dialer = dialTunnel({
      url: `http://127.0.0.1:${(frozen.address() as AddressInfo).port}`,
      fallbackUrls: [scheduler.url],
      transport: 'http2',
      token: TOKEN,
      info: runtimeInfo('rt-frozen'),
      handler: (_req, res) => res.end(),
      clock,
      // A dial gets as long as a silent tunnel: interval plus timeout, 400 ms here.
      pingIntervalMs: 200,
      random: () => 0,
      backoff: { initialMs: 10, maxMs: 10 },
    });
    try {
      await until(() => reached === 1);
      // Given up, the dial leaves one timer, the redial; dial timeouts are real time (socket I/O).
      await until(() => clock.pendingTimers === 1, 3000);
      await clock.advance(10);
      await until(() => dialer.connected, 3000);
      await accepted;
    } finally {
      await dialer.close();
      frozen.closeAllConnections();
      frozen.close();
    }
  });

  it('stops reconnecting once closed, and logs that close as info, not as a lost tunnel', async () => {
    const scheduler = await startScheduler();
    open.schedulers.push(scheduler);
    const clock = new ManualClock();
    const { logger, lines } = captureLogger();
    const accepted = scheduler.nextTunnel('rt-close');
    const dialer = dialTunnel({
      url: scheduler.url,
      token: TOKEN,
      info: runtimeInfo('rt-close'),
      handler: (_req, res) => res.end(),
      clock,
      logger,
    });
    const tunnel = await accepted;
    await until(() => dialer.connected);
    void dialer.close();
    void dialer.close();
    assert.match(await tunnel.whenClosed, /GOAWAY|closed/);
    await until(() => !dialer.connected);
    await clock.advance(60_000);
    assert.equal(dialer.connected, false);
    assert.equal(scheduler.endpoint.list().length, 0);
    assert.equal(clock.pendingTimers, 0);
    assert.deepEqual(
      lines.filter((l) => l.msg.startsWith('tunnel ')).map((l) => `${l.level} ${l.msg}`),
      ['info tunnel connected', 'info tunnel closed'],
    );
  });

  it('declares a scheduler dead when it stops answering pings, then redials', async () => {
    // A "scheduler" that completes the WebSocket upgrade and then goes mute: no HTTP/2, no pongs.
    const server = http.createServer();
    const wss = new WebSocketServer({ server, autoPong: false, perMessageDeflate: false });
    let upgrades = 0;
    wss.on('connection', () => upgrades++);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const clock = new ManualClock();
    const reasons: string[] = [];
    const dialer = dialTunnel({
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      token: TOKEN,
      info: runtimeInfo('rt-mute'),
      handler: (_req, res) => res.end(),
      clock,
      pingIntervalMs: 1000,
      random: () => 0,
      backoff: { initialMs: 100 },
      onDisconnected: (reason) => reasons.push(reason),
    });
    try {
      await until(() => dialer.connected);
      await clock.advance(1999);
      assert.deepEqual(reasons, [], 'alive until interval plus timeout has passed');
      await clock.advance(1);
      assert.deepEqual(reasons, ['no ping answer within 1000 ms']);
      assert.equal(dialer.connected, false);
      await clock.advance(100);
      await until(() => upgrades === 2);
    } finally {
      void dialer.close();
      for (const client of wss.clients) client.terminate();
      wss.close();
      server.closeAllConnections();
      server.close();
    }
  });
});
