// The suites' throwaway redis-server: started only once it accepts
// connections, and never taken to be started on a port another process holds
// (a client there would reach that process's server, and its data).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { redisServerMissing, startRedisServer } from '../src/testing.ts';

if (redisServerMissing) console.log(`# skipping redis-server helper tests: ${redisServerMissing}`);

describe('startRedisServer', { skip: redisServerMissing }, () => {
  it('answers PING once started, and is gone once stopped', async () => {
    const redis = await startRedisServer();
    assert.equal(await ping(redis.port), '+PONG');
    await redis.stop();
    assert.notEqual(redis.child.exitCode ?? redis.child.signalCode, null);
  });

  it('refuses, naming why, a port another process holds', async () => {
    const holder = net.createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const { port } = holder.address() as net.AddressInfo;
    try {
      await assert.rejects(
        startRedisServer({ port }),
        new RegExp(`127\\.0\\.0\\.1:${port}: .*(in use|Failed listening)`),
      );
    } finally {
      holder.close();
    }
  });
});

function ping(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write('PING\r\n'));
    socket.once('data', (chunk) => (socket.destroy(), resolve(chunk.toString().trim())));
    socket.once('error', reject);
  });
}
