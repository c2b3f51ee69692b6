// The gateway binary turns TCP keepalive on for every connection it accepts,
// plain or TLS: it writes nothing of its own on an idle event stream, so a
// client whose host vanished without a FIN would otherwise hold its stream
// until a write to it failed. Read in the socket's timer (see
// test/support/tcp-keepalive.ts).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { certificateFor127 } from '@switchyard/service/testing';
import { spawnApp, type AppProcess } from '../support/processes.ts';
import { assertProbedWhenIdle, tcpTimersMissing } from '../support/tcp-keepalive.ts';

const certificate = certificateFor127();

describe('the gateway binary and TCP keepalive', { skip: tcpTimersMissing }, () => {
  const gateways: { name: string; gateway?: AppProcess }[] = [{ name: 'plain' }, { name: 'TLS' }];
  let dir: string | undefined;
  before(async () => {
    const args = ['--host', '127.0.0.1', '--port', '0', '--schedulers', 'http://127.0.0.1:9', '--drain-delay-ms', '0'];
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
      const socket =
        g.name === 'TLS' && !('missing' in certificate)
          ? tls.connect({ host: '127.0.0.1', port, ca: certificate.cert })
          : net.connect(port, '127.0.0.1');
      socket.on('error', () => {});
      try {
        const answered = new Promise<void>((resolve) => socket.once('data', () => resolve()));
        socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
        await answered;
        await assertProbedWhenIdle(port, socket.localPort!);
      } finally {
        socket.destroy();
      }
    });
  }
});
