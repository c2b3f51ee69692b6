// A managed Redis's endpoint in front of real redis-servers, for the suites
// of every Redis client (a gateway's route cache, a runtime's metering): a
// TCP forwarder whose target a failover moves, counting the dials made
// through it.
import { connect, createServer } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';

export interface RedisEndpoint {
  readonly port: number;
  /** Where new connections go; connections open stay with the server they reached, as when a DNS name moves. */
  target: number;
  /** Connections accepted so far: each a dial of a client. */
  readonly dials: number;
  /** The open connections' server is gone without a word (powered off, cut off): they carry nothing more. */
  freeze(): void;
  close(): Promise<void>;
}

/** A TCP forwarder on 127.0.0.1 to the port `target` (a redis-server's), counting its dials. */
export async function startRedisEndpoint(target: number): Promise<RedisEndpoint> {
  const sockets = new Set<Socket>();
  let dials = 0;
  const server: Server = createServer((client) => {
    dials++;
    const upstream = connect(endpoint.target, '127.0.0.1');
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.once('close', () => (sockets.delete(socket), client.destroy(), upstream.destroy()));
      socket.on('error', () => {});
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const endpoint: RedisEndpoint = {
    port: (server.address() as AddressInfo).port,
    target,
    get dials() {
      return dials;
    },
    freeze: () => {
      for (const socket of sockets) {
        socket.unpipe();
        socket.pause();
      }
    },
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return endpoint;
}
