// The metering sink takes its Redis URL as the gateway's route cache does:
// a URL ioredis would misread is refused before anything is dialled, and
// `rediss://` to a host name names it in the TLS handshake (SNI).
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import tls from 'node:tls';
import { SwitchyardError } from '@switchyard/protocol';
import { redisMeteringSink } from '@switchyard/sandbox';

describe('redis metering sink: its URL', () => {
  it('refuses a URL ioredis would misread, without quoting it', () => {
    for (const url of [
      'redis://:SECRET#1@redis.example:6379',
      'redis://:SECRET/1@redis.example:6379',
      'redis://:SECRET@redis.example:6379/metering',
      'REDISS://:SECRET@redis.example:6380',
      'redis://:SECRET@redis.example:6379?enableOfflineQueue=false',
    ]) {
      assert.throws(
        () => redisMeteringSink({ url, stream: 'switchyard:metering' }),
        (error: unknown) => {
          assert.ok(error instanceof SwitchyardError, String(error));
          assert.match(error.message, /metering redisUrl/);
          assert.doesNotMatch(error.message, /SECRET/);
          return true;
        },
        url,
      );
    }
  });

  // A TLS endpoint that only records the name each client asks for (none: no SNI)
  // and then ends the handshake: the name is what this test is about, not Redis.
  describe('over rediss://', () => {
    const named: (string | undefined)[] = [];
    const waiting: (() => void)[] = [];
    let asked: string | undefined;
    const server = tls.createServer({
      SNICallback: (name, done) => {
        asked = name;
        done(new Error('only the name was wanted'));
      },
    });
    server.on('tlsClientError', (_error, socket) => {
      named.push(asked);
      asked = undefined;
      socket.destroy();
      waiting.splice(0).forEach((wake) => wake());
    });
    const firstHandshake = async (): Promise<string | undefined> => {
      if (named.length === 0) await new Promise<void>((resolve) => waiting.push(resolve));
      return named[0];
    };
    after(() => new Promise<void>((resolve) => server.close(() => resolve())));

    it('names the host it dials (SNI)', async () => {
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const { port } = server.address() as AddressInfo;
      const sink = redisMeteringSink({ url: `rediss://localhost:${port}`, stream: 'switchyard:metering' });
      try {
        assert.equal(await firstHandshake(), 'localhost');
      } finally {
        await sink.close();
      }
    });
  });
});
