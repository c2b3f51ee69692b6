// For tests of servers behind TLS (`@switchyard/service/testing`): a
// throwaway certificate, and a TLS-ending front that passes the decrypted
// bytes to a port, as an ingress or load balancer in front of a scheduler
// would.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';

/**
 * A self-signed certificate for `subjectAltName` (e.g. `DNS:localhost`), made with the openssl CLI; none
 * when the CLI is missing (the caller then skips with the reason; CI
 * installs it).
 */
export function certificateFor(subjectAltName: string): { key: string; cert: string } | { missing: string } {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-tls-'));
  try {
    execFileSync(
      'openssl',
      [
        ...['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1'],
        ...['-subj', '/CN=switchyard test', '-addext', `subjectAltName=${subjectAltName}`],
        ...['-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')],
      ],
      { stdio: 'ignore' },
    );
    return { key: readFileSync(join(dir, 'key.pem'), 'utf8'), cert: readFileSync(join(dir, 'cert.pem'), 'utf8') };
  } catch (error) {
    return { missing: `no test certificate (openssl CLI: ${(error as Error).message})` };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** certificateFor the address most tests serve on. */
export function certificateFor127(): { key: string; cert: string } | { missing: string } {
  return certificateFor('IP:127.0.0.1');
}

export interface TlsFront {
  /** `https://127.0.0.1:<port>` */
  readonly url: string;
  /** The protocol ALPN settled on, per connection passed on (`false`: none asked for). */
  readonly negotiated: ReadonlyArray<string | false>;
  close(): Promise<void>;
}

/**
 * Ends TLS on 127.0.0.1 with `certificate` and pipes each connection's bytes
 * to `port` (which may start listening later). `alpn` is what it offers by ALPN:
 * `['http/1.1']` answers a client asking only for `h2` with a TLS alert, as
 * Node's https servers and most proxies without HTTP/2 do; with `h2` in it
 * the bytes are still only piped, as by a load balancer that ends TLS, so
 * the server behind must speak HTTP/2 itself (schedulers do, h2c).
 */
export async function startTlsFront(
  certificate: { key: string; cert: string },
  port: number,
  alpn: readonly string[] = ['http/1.1'],
): Promise<TlsFront> {
  const negotiated: Array<string | false> = [];
  const open = new Set<net.Socket>();
  const server = tls.createServer({ ...certificate, ALPNProtocols: [...alpn] }, (client) => {
    negotiated.push(client.alpnProtocol ?? false);
    const upstream = net.connect(port, '127.0.0.1');
    open.add(client);
    const end = (): void => void (client.destroy(), upstream.destroy(), open.delete(client));
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    client.pipe(upstream).pipe(client);
  });
  // A client that fails the handshake (an untrusted certificate) is no error of the front's.
  server.on('tlsClientError', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `https://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    negotiated,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of open) socket.destroy();
      }),
  };
}

export interface FreezableRelay {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  readonly port: number;
  /**
   * Stops carrying bytes, both ways, on every connection so far, and leaves
   * them open: to each end, the other's host vanished (its kernel still
   * acknowledges what fits in its buffers, then takes no more).
   */
  freeze(): void;
  close(): void;
}

/** A TCP relay on 127.0.0.1 to `port`: its listener, and the sockets of its connections open now, both ends. */
async function relayTo(port: number): Promise<{ server: net.Server; open: Set<net.Socket>; port: number }> {
  const open = new Set<net.Socket>();
  const server = net.createServer((inbound) => {
    const outbound = net.connect(port, '127.0.0.1');
    for (const socket of [inbound, outbound]) {
      open.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => open.delete(socket));
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, open, port: (server.address() as net.AddressInfo).port };
}

/** A TCP relay on 127.0.0.1 to `port`, whose connections `freeze` stops carrying without closing them. */
export async function freezableRelay(port: number): Promise<FreezableRelay> {
  const relay = await relayTo(port);
  return {
    url: `http://127.0.0.1:${relay.port}`,
    port: relay.port,
    freeze: () => {
      for (const socket of relay.open) {
        socket.unpipe();
        socket.pause();
      }
    },
    close: () => {
      for (const socket of relay.open) socket.destroy();
      relay.server.close();
    },
  };
}

export interface CuttableRelay {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** Connections `cut` has destroyed so far. */
  readonly cuts: number;
  /**
   * Destroys every connection open now, both ways, as a network that drops
   * them would; the relay goes on taking new ones.
   */
  cut(): void;
  close(): void;
}

/** A TCP relay on 127.0.0.1 to `port`, whose open connections `cut` drops while it keeps listening. */
export async function cuttableRelay(port: number): Promise<CuttableRelay> {
  const relay = await relayTo(port);
  let cuts = 0;
  const cut = (): void => {
    cuts += relay.open.size;
    for (const socket of relay.open) socket.destroy();
  };
  return {
    url: `http://127.0.0.1:${relay.port}`,
    get cuts() {
      return cuts;
    },
    cut,
    close: () => {
      cut();
      relay.server.close();
    },
  };
}

export {
  REDIS_SERVER_BINARY,
  redisServerMissing,
  startRedisServer,
  type RedisServer,
  type RedisServerOptions,
} from './testing-redis.ts';
export { startRedisEndpoint, type RedisEndpoint } from './testing-redis-endpoint.ts';
export { FETCH_BLOCKED_PORTS, onBlockedPort } from './testing-blocked-ports.ts';
