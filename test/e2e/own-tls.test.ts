// Scheduler replicas and a gateway serving TLS on their own ports
// (tls.certFile and tls.keyFile), with no TLS-ending front: runtimes dial
// the replicas on https: URLs, the replicas sync epochs over it, a gateway
// schedules, relays and holds its event streams (HTTP/2 by ALPN) through
// it, and MCP clients reach a gateway on https:. The private CA is trusted
// as the charts' `trustedCA` does (NODE_EXTRA_CA_CERTS).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { certificateFor127 } from '@switchyard/service/testing';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { spawnApp } from '../support/processes.ts';
import { connect, countOnBothRuntimes, counter, metric, type AnyClient } from './support.ts';

const certificate = certificateFor127();
const missing = 'missing' in certificate ? certificate.missing : false;

describe('scheduler replicas and gateways serving TLS themselves', { skip: missing }, () => {
  let dir: string | undefined;
  let cluster: TestCluster;
  const defaultCAs = tls.getCACertificates('default');
  const file = (name: string): string => join(dir!, name);
  before(async () => {
    if ('missing' in certificate) return;
    dir = mkdtempSync(join(tmpdir(), 'switchyard-scheduler-tls-'));
    writeFileSync(file('ca.crt'), certificate.cert);
    writeFileSync(file('tls.crt'), certificate.cert);
    writeFileSync(file('tls.key'), certificate.key);
    // This process reads the replicas' state on their https: URLs.
    tls.setDefaultCACertificates([...defaultCAs, certificate.cert]);
    cluster = await startCluster({
      schedulers: 2,
      runtimes: 2,
      gateways: 0,
      env: { NODE_EXTRA_CA_CERTS: file('ca.crt') },
      schedulerArgs: ['--tls.cert-file', file('tls.crt'), '--tls.key-file', file('tls.key')],
    });
  });
  after(async () => {
    tls.setDefaultCACertificates(defaultCAs);
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('advertises https: URLs, answers plain HTTP on its port with nothing, and holds tunnels inside TLS', async () => {
    for (const scheduler of cluster.schedulers) {
      assert.match(scheduler.url!, /^https:\/\/127\.0\.0\.1:\d+$/);
      const plain = scheduler.url!.replace('https:', 'http:');
      await assert.rejects(fetch(`${plain}/healthz`, { signal: AbortSignal.timeout(2000) }));
    }
    // HTTP/2 only for a client that asks for nothing else; browsers, curl and probes offer both.
    const negotiated = (protocols: string[]): Promise<string | false | null> =>
      new Promise((resolve, reject) => {
        const port = Number(new URL(cluster.schedulers[0]!.url!).port);
        const socket = tls.connect({ host: '127.0.0.1', port, ALPNProtocols: protocols }, () => {
          resolve(socket.alpnProtocol);
          socket.destroy();
        });
        socket.once('error', reject);
      });
    assert.equal(await negotiated(['h2', 'http/1.1']), 'http/1.1');
    assert.equal(await negotiated(['h2']), 'h2');
    for (const [i, runtime] of cluster.runtimes.entries()) {
      const line = await runtime.waitForLog((l) => l.msg === 'tunnel connected', 5_000);
      assert.equal(line.transport, 'http2', runtime.name);
      assert.equal(line.url, `${cluster.schedulers[i]!.url}/api/runtime/connect`);
    }
    const epochs = await Promise.all(
      cluster.schedulers.map(
        async (s) => ((await (await fetch(`${s.url}/api/epoch`)).json()) as { epoch: number }).epoch,
      ),
    );
    assert.ok(
      epochs.every((e) => e !== null && e > 0),
      `both replicas hold epochs (synced over TLS): ${epochs}`,
    );
  });

  it('serves sessions on both runtimes through a gateway, with event streams as HTTP/2 by ALPN', async () => {
    const gateway = await cluster.addGateway();
    const base = `http://127.0.0.1:${gateway.port}`;
    const clients: AnyClient[] = [];
    try {
      await countOnBothRuntimes(base, clients);
      const warnings = gateway.logs.filter((l) => (l.level as number) >= 40).map((l) => l.msg);
      assert.deepEqual(warnings, [], 'no fallback to HTTP/1.1 for event streams, no TLS failure');
      assert.equal(await metric(base, 'switchyard_gateway_upstream_errors_total', { reason: 'tls' }), 0);
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
  });

  it('has a gateway serve /mcp over its own TLS too, and nothing over plain HTTP', async () => {
    const tlsArgs = ['--tls.cert-file', file('tls.crt'), '--tls.key-file', file('tls.key')];
    const gateway = await cluster.addGateway(undefined, { args: tlsArgs });
    assert.equal(gateway.logs.find((l) => l.msg === 'ready')?.url, `https://127.0.0.1:${gateway.port}/mcp`);
    const client = await connect('v2', `https://127.0.0.1:${gateway.port}/mcp`);
    try {
      for (let n = 1; n <= 3; n++) assert.equal(await counter(client), n);
    } finally {
      await client.close();
    }
    const plain = `http://127.0.0.1:${gateway.port}/healthz`;
    await assert.rejects(fetch(plain, { signal: AbortSignal.timeout(2000) }));
  });

  it('refuses to start on a key that does not go with its certificate, naming both files', async () => {
    const other = certificateFor127();
    assert.ok(!('missing' in other));
    writeFileSync(file('other.key'), other.key);
    const args = ['--port', '0', '--join-tokens', 'join-token-0123456789abcdef'];
    const tlsArgs = ['--tls.cert-file', file('tls.crt'), '--tls.key-file', file('other.key')];
    await assert.rejects(
      spawnApp('scheduler', 'bad-tls', [...args, ...tlsArgs], { readyTimeoutMs: 10_000 }),
      (error) => {
        assert.match(
          (error as Error).message,
          /switchyard-scheduler: tls: .*tls\.crt and .*other\.key make no TLS context/,
        );
        return true;
      },
    );
  });
});
