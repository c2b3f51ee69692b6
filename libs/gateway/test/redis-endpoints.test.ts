// The route cache's Redis behind the endpoint a managed Redis gives: one
// whose target moves in a failover, and a TLS one that routes by server
// name. Real redis-servers, a real TCP forwarder and TLS front on loopback.
import type { ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import tls from 'node:tls';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { certificateFor } from '@switchyard/service/testing';
import { REDIS_ROUTE_PREFIX } from '@switchyard/gateway';
import { INITIALIZE, post, startHarness } from './harness.ts';
import type { Harness } from './harness.ts';
import { skip, startRedis } from './fixtures/redis.ts';
import { failoverBehindEndpoint } from './fixtures/redis-endpoint.ts';

describe('route cache across a failover behind one endpoint', { skip }, () => {
  const failover = failoverBehindEndpoint();

  it('follows the endpoint to the new primary instead of writing to the demoted one for ever', async () => {
    const { primary, promoted, endpoint, stored } = failover;
    assert.equal(await stored(primary.url), true, 'routes reach the primary');
    // The failover: the old primary becomes a replica of the new one, and
    // stays up, answering each write on the gateway's connection with READONLY.
    const admin = new Redis(primary.url);
    try {
      await admin.replicaof('127.0.0.1', promoted.port);
      endpoint.target = promoted.port;
    } finally {
      admin.disconnect();
    }
    for (let deadline = performance.now() + 5_000; !(await stored(promoted.url)); await sleep(50)) {
      assert.ok(performance.now() < deadline, 'routes reach the new primary within 5 s');
    }
  });
});

describe('route cache across a failover that takes the old primary with it', { skip }, () => {
  const failover = failoverBehindEndpoint();

  it('leaves a connection that no longer answers for the endpoint, which reaches the new primary', async () => {
    const { primary, promoted, endpoint, stored } = failover;
    assert.equal(await stored(primary.url), true, 'routes reach the primary');
    // Its host powered off: no reset, no FIN, the connection open on the gateway's
    // side for as long as the kernel retransmits (some 15 minutes); the endpoint's
    // name already points to the promoted replica.
    endpoint.freeze();
    endpoint.target = promoted.port;
    for (let deadline = performance.now() + 10_000; !(await stored(promoted.url)); await sleep(100)) {
      assert.ok(performance.now() < deadline, 'routes reach the new primary within 10 s');
    }
  });
});

const localhostCertificate = certificateFor('DNS:localhost');

/**
 * A shared TLS endpoint of a managed Redis (or an Envoy, an ingress passing
 * TLS through): it picks the certificate, and the Redis behind, by the name
 * the client asks for (SNI), and has nothing for a client that asks none.
 */
async function startSniFront(redisPort: number, certificate: { key: string; cert: string }) {
  const context = tls.createSecureContext(certificate);
  const sockets = new Set<Socket>();
  const server = tls.createServer(
    { SNICallback: (name, done) => (name === 'localhost' ? done(null, context) : done(new Error(`no ${name}`))) },
    (client) => {
      const upstream = connect(redisPort, '127.0.0.1');
      for (const socket of [client, upstream]) {
        sockets.add(socket);
        socket.once('close', () => (sockets.delete(socket), client.destroy(), upstream.destroy()));
        socket.on('error', () => {});
      }
      client.pipe(upstream).pipe(client);
    },
  );
  server.on('tlsClientError', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe(
  'route cache on a TLS endpoint that routes by server name',
  { skip: skip || ('missing' in localhostCertificate ? localhostCertificate.missing : false) },
  () => {
    const defaultCAs = tls.getCACertificates('default');
    let redis: { url: string; child: ChildProcess };
    let front: Awaited<ReturnType<typeof startSniFront>>;
    let h: Harness;
    before(async () => {
      if ('missing' in localhostCertificate) return;
      // The endpoint's CA, trusted as NODE_EXTRA_CA_CERTS (the chart's trustedCA) makes a gateway trust it.
      tls.setDefaultCACertificates([...defaultCAs, localhostCertificate.cert]);
      redis = await startRedis();
      front = await startSniFront(Number(new URL(redis.url).port), localhostCertificate);
      h = await startHarness(1, { routeCache: { redisUrl: `rediss://localhost:${front.port}` } });
    });
    after(async () => {
      await h?.close();
      await front?.close();
      redis?.child.kill('SIGTERM');
      tls.setDefaultCACertificates(defaultCAs);
    });

    it('names the host it dials, so the endpoint lets it through to its Redis', async () => {
      const client = new Redis(redis.url);
      try {
        for (let deadline = performance.now() + 5_000; ; await sleep(50)) {
          assert.ok(performance.now() < deadline, 'routes reach redis through the endpoint within 5 s');
          const init = await post(h.url, INITIALIZE);
          assert.equal(init.status, 200);
          const session = init.headers.get('mcp-session-id')!;
          if ((await client.exists(`${REDIS_ROUTE_PREFIX}thread:${session}`)) === 1) break;
        }
      } finally {
        client.disconnect();
      }
    });
  },
);
