// The deployment with runtimes on private nodes: scheduler replicas reached
// on https: URLs, TLS ended by a front that passes the bytes on (a load
// balancer ending TLS), its private CA trusted as the charts' `trustedCA`
// does (NODE_EXTRA_CA_CERTS). Each replica advertises its front, so every
// hop to it crosses TLS: runtime tunnels (HTTP/2 after the upgrade), epoch
// sync between replicas, the gateway's scheduling calls, relay connections
// and event streams. Replica s0's front offers HTTP/2 by ALPN besides
// HTTP/1.1, s1's only HTTP/1.1, so event streams run as HTTP/2 by ALPN to
// one and fall back to HTTP/1.1 to the other.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { certificateFor127, startTlsFront, type TlsFront } from '@switchyard/service/testing';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { countOnBothRuntimes, freePort, metric, type AnyClient } from './support.ts';

const certificate = certificateFor127();
const missing = 'missing' in certificate ? certificate.missing : false;
const NO_H2_WARNING = 'scheduler TLS endpoint does not offer HTTP/2 (ALPN h2); event streams use HTTP/1.1';
const ALPN = [['h2', 'http/1.1'], ['http/1.1']] as const;

describe('scheduler replicas behind TLS-ending fronts', { skip: missing }, () => {
  let dir: string | undefined;
  let cluster: TestCluster;
  const fronts: TlsFront[] = [];
  const defaultCAs = tls.getCACertificates('default');
  before(async () => {
    if ('missing' in certificate) return;
    dir = mkdtempSync(join(tmpdir(), 'switchyard-ca-'));
    writeFileSync(join(dir, 'ca.crt'), certificate.cert);
    // This process reads the replicas' state on their advertised URLs, the fronts.
    tls.setDefaultCACertificates([...defaultCAs, certificate.cert]);
    // Each front is up before its replica, which advertises it.
    const ports = [await freePort(), await freePort()];
    for (const [i, alpn] of ALPN.entries()) fronts.push(await startTlsFront(certificate, ports[i]!, alpn));
    cluster = await startCluster({
      schedulers: 2,
      runtimes: 0,
      gateways: 0,
      env: { NODE_EXTRA_CA_CERTS: join(dir, 'ca.crt') },
      schedulerArgs: (i) => ['--port', String(ports[i]), '--advertise-url', fronts[i]!.url],
    });
    for (const i of [0, 1]) await cluster.startRuntime(`r${i}`, i, { schedulerUrl: fronts[i]!.url });
    await cluster.waitForRuntimes(['r0', 'r1'], 20_000);
  });
  after(async () => {
    tls.setDefaultCACertificates(defaultCAs);
    await cluster?.stop();
    await Promise.all(fronts.map((f) => f.close()));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('holds each runtime tunnel as HTTP/2 through its front', async () => {
    for (const [i, runtime] of cluster.runtimes.entries()) {
      const line = await runtime.waitForLog((l) => l.msg === 'tunnel connected', 5_000);
      assert.equal(line.transport, 'http2', runtime.name);
      assert.equal(line.url, `${fronts[i]!.url}/api/runtime/connect`, `${runtime.name} dialled its front`);
    }
  });

  it('serves sessions on both runtimes through a gateway, relays and event streams inside TLS', async () => {
    const gateway = await cluster.addGateway(fronts.map((f) => f.url));
    const base = `http://127.0.0.1:${gateway.port}`;
    const clients: AnyClient[] = [];
    try {
      await countOnBothRuntimes(base, clients);
      let relays = 0;
      for (const s of cluster.schedulers)
        relays += await metric(s.url!, 'switchyard_scheduler_relay_connections_total');
      assert.ok(relays > 0, 'tool calls went on relay connections');
      assert.ok(fronts[0]!.negotiated.includes('h2'), 'event streams to s0 asked for HTTP/2 by ALPN');
      assert.ok(!fronts[1]!.negotiated.includes('h2'));
      const warnings = gateway.logs.filter((l) => (l.level as number) >= 40).map((l) => l.msg);
      assert.deepEqual(warnings, [NO_H2_WARNING], 'HTTP/1.1 only for event streams to s1, said once; nothing else');
      assert.equal(await metric(base, 'switchyard_gateway_upstream_errors_total', { reason: 'tls' }), 0);
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
  });
});
