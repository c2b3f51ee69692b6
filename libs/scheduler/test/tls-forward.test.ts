import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import https from 'node:https';
import tls from 'node:tls';
import type { RuntimeNode } from '@switchyard/runtime';
import { FORWARDED_HEADER } from '@switchyard/protocol';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { certificateFor127 } from '@switchyard/service/testing';
import { MemoryLeaseStore } from '@switchyard/election';
import { startReplicas, startRuntime, until } from './support.ts';

function get(
  url: string,
  options: https.RequestOptions = {},
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    https
      .get(url, options, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.once('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      })
      .once('error', reject);
  });
}

describe('replicas serving TLS themselves (https: advertise URLs)', () => {
  const certificate = certificateFor127();
  const missing = 'missing' in certificate ? certificate.missing : false;
  const defaults = tls.getCACertificates('default');
  let replicas: SchedulerReplica[] = [];
  let runtime: RuntimeNode | undefined;

  before(async () => {
    if ('missing' in certificate) return;
    tls.setDefaultCACertificates([...defaults, certificate.cert]);
    replicas = await startReplicas(2, new MemoryLeaseStore(), undefined, {
      tls: certificate,
      advertiseUrl: 'https://127.0.0.1:{port}',
    });
    runtime = await startRuntime('r1', replicas[1]!.url);
  });

  after(async () => {
    await runtime?.close();
    await Promise.all(replicas.map((r) => r.close()));
    tls.setDefaultCACertificates(defaults);
  });

  it('forwards /api/proxy to the owner replica over https', { skip: missing }, async () => {
    const other = replicas[0]!;
    await until('r1 seen on the other replica', async () => {
      const { body } = await get(`${other.url}/api/runtimes`);
      return (
        JSON.parse(body).runtimes.some((r: any) => r.id === 'r1' && r.owner === replicas[1]!.replicaId) || undefined
      );
    });
    const res = await get(`${other.url}/api/proxy/r1/healthz`);
    assert.equal(res.status, 200, res.body);
    assert.deepEqual(JSON.parse(res.body), { status: 'ok' });
    assert.equal(res.headers[FORWARDED_HEADER], '1');
  });

  it(
    "checks the owner replica's certificate for its own name, not the Host the caller used",
    { skip: missing },
    async () => {
      // A gateway reaching this replica by a name the owner's certificate need not list (a Service, a load balancer).
      const res = await get(`${replicas[0]!.url}/api/proxy/r1/healthz`, {
        headers: { host: `scheduler.example:${replicas[0]!.port}` },
        rejectUnauthorized: false,
      });
      assert.equal(res.status, 200, res.body);
      assert.equal(res.headers[FORWARDED_HEADER], '1');
    },
  );
});
