// A throwaway redis-server for the suites that need a real one. Free ports are
// found by binding and closing one, and another test process may take that
// port before redis-server binds it: redis-server then exits, and a client
// given the port would reach the other test's server and see its data. So a
// server counts as started only once it says it accepts connections, and a
// port it could not bind is traded for another.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const REDIS_SERVER_BINARY = '/usr/bin/redis-server';

/** Why suites needing redis-server skip (it is not installed), else false. */
export const redisServerMissing: string | false = existsSync(REDIS_SERVER_BINARY)
  ? false
  : `${REDIS_SERVER_BINARY} is not installed`;

export interface RedisServerOptions {
  /** The loopback address it binds; default 127.0.0.1. */
  readonly host?: '127.0.0.1' | '::1';
  /** Its port, e.g. that of one stopped, to start it again (not traded when taken); default a free one. */
  readonly port?: number;
  /** TLS only, on the port, with this PEM certificate and key (files); clients are not asked for one. */
  readonly tls?: { readonly certFile: string; readonly keyFile: string };
  /** More redis-server arguments, e.g. `--requirepass`, `--user`. */
  readonly args?: readonly string[];
}

export interface RedisServer {
  /** `redis://` (or `rediss://` with TLS) on host and port. */
  readonly url: string;
  readonly port: number;
  readonly child: ChildProcess;
  /** SIGTERM by default (SIGKILL for a crash); resolves once it exited. */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/** Ports tried before giving up: each is lost only to a race with another process. */
const PORT_ATTEMPTS_MAX = 5;
const READY_TIMEOUT_MS = 15_000;

/** A redis-server without persistence, in a directory of its own, ready to accept connections. */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  const host = options.host ?? '127.0.0.1';
  for (let attempt = 1; ; attempt++) {
    const port = options.port ?? (await freePort(host));
    const started = await startOn(port, host, options);
    if ('server' in started) return started.server;
    if (options.port !== undefined || attempt === PORT_ATTEMPTS_MAX) {
      throw new Error(`redis-server did not start on ${host}:${port}: ${started.why}`);
    }
  }
}

async function freePort(host: string): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, host, resolve));
  const { port } = probe.address() as net.AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

async function startOn(
  port: number,
  host: string,
  { tls, args = [] }: RedisServerOptions,
): Promise<{ server: RedisServer } | { why: string }> {
  // A directory of its own: a replica writes the primary's data to disk.
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-redis-'));
  const listening = tls
    ? ['--port', '0', '--tls-port', String(port), '--tls-cert-file', tls.certFile, '--tls-key-file', tls.keyFile]
    : ['--port', String(port)];
  const child = spawn(
    REDIS_SERVER_BINARY,
    [
      ...listening,
      ...(tls ? ['--tls-ca-cert-file', tls.certFile, '--tls-auth-clients', 'no'] : []),
      ...['--bind', host, '--save', '', '--appendonly', 'no', '--dir', dir],
      ...args,
    ],
    { stdio: ['ignore', 'pipe', 'ignore'] },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  void exited.then(() => rmSync(dir, { recursive: true, force: true }));
  let log = '';
  const ready = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), READY_TIMEOUT_MS);
    child.stdout!.on('data', (chunk: Buffer) => {
      log = (log + chunk.toString()).slice(-2000);
      if (!log.includes('Ready to accept connections')) return;
      clearTimeout(timer);
      resolve(true);
    });
    void exited.then(() => (clearTimeout(timer), resolve(false)));
  });
  if (!ready) {
    child.kill('SIGKILL');
    await exited;
    const failed = /# (Warning: Could not create server.*|Failed listening.*)/.exec(log)?.[1];
    return { why: failed ?? `not ready within ${READY_TIMEOUT_MS} ms` };
  }
  // Its log goes on: read and dropped, or a full pipe would stall it.
  child.stdout!.removeAllListeners('data');
  child.stdout!.resume();
  let stopping: Promise<void> | undefined;
  return {
    server: {
      url: `${tls ? 'rediss' : 'redis'}://${host === '::1' ? '[::1]' : host}:${port}`,
      port,
      child,
      stop(signal = 'SIGTERM') {
        stopping ??= (child.kill(signal), exited);
        return stopping;
      },
    },
  };
}
