// The gateway binary turns TCP keepalive on for every connection it accepts,
// plain or TLS: it writes nothing of its own on an idle event stream, so a
// client whose host vanished without a FIN would otherwise hold its stream
// until a write to it failed. Node offers no getsockopt; Linux shows each
// socket's pending timer in /proc/net/tcp, and an idle established socket
// has one (`02`, due in the keepalive delay) only when keepalive is on.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { SERVER_TCP_KEEP_ALIVE_DELAY_MS } from '@switchyard/service';
import { certificateFor127 } from '@switchyard/service/testing';
import { spawnApp, until, type AppProcess } from '../support/processes.ts';

const PROC_NET_TCP = '/proc/net/tcp';
/** /proc/net/tcp gives timers in clock ticks of USER_HZ, 100 per second on Linux. */
const TICKS_PER_S = 100;
const certificate = certificateFor127();

/**
 * The timer of the established socket from `local` to `remote` (ports on
 * 127.0.0.1), as `tr:when`, once it is idle: none while its retransmit timer
 * (`01`) says data it sent is not yet acknowledged.
 */
function timerOf(localPort: number, remotePort: number): string | undefined {
  const hex = (port: number): string => `0100007F:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  for (const line of readFileSync(PROC_NET_TCP, 'utf8').split('\n').slice(1)) {
    const [, local, remote, state, , timer] = line.trim().split(/\s+/);
    if (local === hex(localPort) && remote === hex(remotePort) && state === '01') {
      return timer?.startsWith('01:') ? undefined : timer;
    }
  }
  return undefined;
}

describe(
  'the gateway binary and TCP keepalive',
  { skip: existsSync(PROC_NET_TCP) ? false : 'no /proc/net/tcp' },
  () => {
    const gateways: { name: string; gateway?: AppProcess }[] = [{ name: 'plain' }, { name: 'TLS' }];
    let dir: string | undefined;
    before(async () => {
      const args = [
        '--host',
        '127.0.0.1',
        '--port',
        '0',
        '--schedulers',
        'http://127.0.0.1:9',
        '--drain-delay-ms',
        '0',
      ];
      gateways[0]!.gateway = await spawnApp('gateway', 'gw-keepalive', args);
      if ('missing' in certificate) return;
      dir = mkdtempSync(join(tmpdir(), 'switchyard-gateway-keepalive-'));
      writeFileSync(join(dir, 'tls.crt'), certificate.cert);
      writeFileSync(join(dir, 'tls.key'), certificate.key);
      const tlsArgs = ['--tls.cert-file', join(dir, 'tls.crt'), '--tls.key-file', join(dir, 'tls.key')];
      gateways[1]!.gateway = await spawnApp('gateway', 'gw-keepalive-tls', [...args, ...tlsArgs]);
    });
    after(async () => {
      await Promise.all(gateways.map((g) => g.gateway?.stop()));
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    for (const g of gateways) {
      it(`probes an idle accepted ${g.name} connection after SERVER_TCP_KEEP_ALIVE_DELAY_MS`, async (t) => {
        if (!g.gateway) return t.skip('missing' in certificate ? certificate.missing : 'no gateway');
        const port = g.gateway.port!;
        // Answered, so the gateway has accepted it: the kernel holds a connection
        // before, without keepalive, until the app takes it and turns it on.
        const socket =
          g.name === 'TLS' && !('missing' in certificate)
            ? tls.connect({ host: '127.0.0.1', port, ca: certificate.cert })
            : net.connect(port, '127.0.0.1');
        socket.on('error', () => {});
        try {
          const answered = new Promise<void>((resolve) => socket.once('data', () => resolve()));
          socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
          await answered;
          const timer = await until('the accepted socket, idle', () => timerOf(port, socket.localPort!), 5_000);
          const [active, when] = timer.split(':') as [string, string];
          assert.equal(active, '02', `keepalive timer pending (00 is none): ${timer}`);
          const dueMs = (parseInt(when, 16) / TICKS_PER_S) * 1000;
          assert.ok(dueMs <= SERVER_TCP_KEEP_ALIVE_DELAY_MS, `due in ${dueMs} ms`);
          assert.ok(dueMs > SERVER_TCP_KEEP_ALIVE_DELAY_MS - 10_000, `due in ${dueMs} ms`);
        } finally {
          socket.destroy();
        }
      });
    }
  },
);
