// The scheduler binary turns TCP keepalive on for every connection its
// listener accepts, plain or TLS, whatever it turns out to carry (HTTP/1.1,
// HTTP/2, an upgrade): a gateway whose host vanished without a FIN would
// otherwise keep what its connections hold here (a stream of a runtime's
// tunnel, a relay) for as long as nothing is written to them. Read in the
// socket's timer (see test/support/tcp-keepalive.ts).
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http2 from 'node:http2';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { certificateFor127 } from '@switchyard/service/testing';
import { spawnApp, type AppProcess } from '../support/processes.ts';
import { assertProbedWhenIdle, tcpTimersMissing } from '../support/tcp-keepalive.ts';

const certificate = certificateFor127();
const ca = 'missing' in certificate ? undefined : certificate.cert;

/** Asks for /healthz over HTTP/1.1 and resolves, with the connection's local port, once it is answered. */
async function answeredHttp1(port: number, secure: boolean): Promise<{ localPort: number; close(): void }> {
  const socket = secure ? tls.connect({ host: '127.0.0.1', port, ca }) : net.connect(port, '127.0.0.1');
  socket.on('error', () => {});
  const answered = once(socket, 'data');
  socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  await answered;
  return { localPort: socket.localPort!, close: () => socket.destroy() };
}

/** Opens an HTTP/2 connection (h2c, or ALPN h2 over TLS) and resolves once the scheduler's settings came. */
async function answeredHttp2(port: number, secure: boolean): Promise<{ localPort: number; close(): void }> {
  const session = http2.connect(`${secure ? 'https' : 'http'}://127.0.0.1:${port}`, secure ? { ca } : {});
  session.on('error', () => {});
  await once(session, 'remoteSettings');
  return { localPort: session.socket.localPort!, close: () => session.destroy() };
}

describe('the scheduler binary and TCP keepalive', { skip: tcpTimersMissing }, () => {
  const schedulers: { name: string; secure: boolean; scheduler?: AppProcess }[] = [
    { name: 'plain', secure: false },
    { name: 'TLS', secure: true },
  ];
  let dir: string | undefined;
  before(async () => {
    const args = (name: string): string[] => [
      ...['--host', '127.0.0.1', '--port', '0', '--replica-id', name, '--drain-delay-ms', '0'],
      ...['--join-tokens', 'a-join-token-0123456789abcdef'],
    ];
    schedulers[0]!.scheduler = await spawnApp('scheduler', 'sched-keepalive', args('sched-keepalive'));
    if ('missing' in certificate) return;
    dir = mkdtempSync(join(tmpdir(), 'switchyard-scheduler-keepalive-'));
    writeFileSync(join(dir, 'tls.crt'), certificate.cert);
    writeFileSync(join(dir, 'tls.key'), certificate.key);
    const tlsArgs = ['--tls.cert-file', join(dir, 'tls.crt'), '--tls.key-file', join(dir, 'tls.key')];
    schedulers[1]!.scheduler = await spawnApp('scheduler', 'sched-keepalive-tls', [
      ...args('sched-keepalive-tls'),
      ...tlsArgs,
    ]);
  });
  after(async () => {
    await Promise.all(schedulers.map((s) => s.scheduler?.stop()));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  for (const s of schedulers) {
    for (const [protocol, open] of [
      ['HTTP/1.1', answeredHttp1],
      ['HTTP/2', answeredHttp2],
    ] as const) {
      it(`probes an idle accepted ${s.name} ${protocol} connection after SERVER_TCP_KEEP_ALIVE_DELAY_MS`, async (t) => {
        if (!s.scheduler) return t.skip('missing' in certificate ? certificate.missing : 'no scheduler');
        const port = s.scheduler.port!;
        const connection = await open(port, s.secure);
        try {
          await assertProbedWhenIdle(port, connection.localPort);
        } finally {
          connection.close();
        }
      });
    }
  }
});
