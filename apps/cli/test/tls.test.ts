// `switchyard status` against a scheduler replica serving TLS (a replica in
// this process, the command as a child): it works once told the CA, and
// says what is wrong, not just "fetch failed", when it is not.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMemoryLock, MemoryLeaseStore } from '@switchyard/election';
import { startSchedulerReplica, type SchedulerReplica } from '@switchyard/scheduler';
import { createMetrics } from '@switchyard/service';
import { certificateFor127 } from '@switchyard/service/testing';
import { runCli } from './support.ts';

const certificate = certificateFor127();
const quiet = { debug() {}, info() {}, warn() {}, error() {} };

describe(
  'switchyard status and a scheduler serving TLS',
  { skip: 'missing' in certificate && certificate.missing },
  () => {
    let replica: SchedulerReplica;
    let dir: string;
    before(async () => {
      if ('missing' in certificate) return;
      dir = mkdtempSync(join(tmpdir(), 'switchyard-cli-tls-'));
      writeFileSync(join(dir, 'ca.crt'), certificate.cert);
      replica = await startSchedulerReplica({
        replicaId: 's0',
        advertiseUrl: 'https://127.0.0.1:{port}',
        host: '127.0.0.1',
        port: 0,
        tls: certificate,
        lock: createMemoryLock(new MemoryLeaseStore()),
        election: { leaseDurationMs: 1500, renewDeadlineMs: 1000, retryPeriodMs: 200 },
        joinTokens: () => [],
        logger: quiet,
        metrics: createMetrics('scheduler'),
      });
    });
    after(async () => {
      await replica?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('names the certificate problem and the way to trust its CA, and exits 1', async () => {
      const { code, stdout, stderr } = await runCli(['status', '--scheduler', replica.url]);
      assert.equal(code, 1, stderr);
      assert.equal(stdout, '');
      assert.match(
        stderr,
        /cannot reach https:\/\/127\.0\.0\.1:\d+: self-signed certificate.* \(trust its CA: NODE_EXTRA_CA_CERTS=/,
      );
    });

    it('shows the cluster once told the CA', async () => {
      const trusted = { NODE_EXTRA_CA_CERTS: join(dir, 'ca.crt') };
      const { code, stdout, stderr } = await runCli(['status', '--scheduler', replica.url], 15_000, trusted);
      assert.equal(code, 0, stderr);
      assert.match(stdout, /^leader: +s0 \(https:\/\/127\.0\.0\.1:\d+\)/m);
    });
  },
);
