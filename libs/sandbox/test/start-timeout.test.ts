import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { SandboxHost } from '@switchyard/sandbox';
import { descendants } from './fixtures/children.ts';
import { connect } from './fixtures/clients.ts';
import { captureLogger, serveHttp1, type Served, testHost } from './fixtures/harness.ts';

/**
 * MCP servers that start and never answer `initialize`: a stdio command that
 * reads nothing (a server stuck loading, a wrapper waiting on a prompt) and
 * an http upstream that takes the request and never answers. Each class
 * bounds its start with `startTimeoutSeconds`; without it a start waited for
 * the MCP SDK's 60 s request timeout, holding the client as long.
 */
describe('sandboxes whose server never answers initialize', () => {
  let host: SandboxHost;
  let served: Served;
  const logger = captureLogger();
  const held: http.ServerResponse[] = [];
  // Takes every request and never answers it.
  const silent = http.createServer((_req, res) => void held.push(res));
  const headers = (cls: string) => ({ 'x-switchyard-class': cls, 'x-switchyard-process': `${cls}-1` });

  before(async () => {
    silent.listen(0, '127.0.0.1');
    await once(silent, 'listening');
    host = testHost({
      runtimeId: 'rt-silent',
      classes: {
        stdio: { engine: 'stdio', command: '/bin/sh', args: ['-c', 'exec sleep 600'], startTimeoutSeconds: 1 },
        http: {
          engine: 'http',
          url: `http://127.0.0.1:${(silent.address() as AddressInfo).port}/mcp`,
          startTimeoutSeconds: 1,
        },
      },
      logger,
    });
    served = await serveHttp1(host);
  });
  after(async () => {
    await served.close();
    await host.close();
    for (const res of held) res.destroy();
    silent.close();
    silent.closeAllConnections();
  });

  for (const cls of ['stdio', 'http'] as const) {
    it(`${cls}: the start fails after startTimeoutSeconds, says why, and leaves nothing running`, async () => {
      const started = performance.now();
      await assert.rejects(connect('v2-legacy', served.url, served.fetch, headers(cls)), /could not start/);
      const elapsed = performance.now() - started;
      assert.ok(elapsed >= 900 && elapsed < 10_000, `the start gave up after ${Math.round(elapsed)} ms`);

      const failed = logger.lines.filter((l) => l.obj.event === 'sandbox.start_failed' && l.obj.class === cls);
      assert.equal(failed.length, 1);
      assert.match(String(failed[0]!.obj.err), /no answer to initialize within 1 s/);
      assert.equal(host.stats().sandboxes, 0);
      if (cls === 'stdio') assert.deepEqual(descendants(), [], 'the server is stopped');
    });
  }
});
