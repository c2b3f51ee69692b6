// Tunnel-over-TLS bench: what a scheduler replica serving its own TLS
// (`tls.certFile`) costs a runtime's tunnel. A scheduler (this process) takes
// tunnels on a plain HTTP port and on an HTTPS one, as a replica with TLS
// does; one runtime (child process) dials both. Measured in one run, one
// HTTP/2 stream's throughput each: through the TLS tunnel, through the plain
// one, and on HTTP/2 over TLS with no tunnel (Node's own TLS, the baseline):
// what the tunnel costs over TLS, against what it costs over TCP (the tunnel
// suite). Paths run in interleaved rounds; every loop has a fixed count; the
// child exits when stdin closes.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { certificateFor127 } from '@switchyard/service/testing';
import { H2_TUNING, createTunnelEndpoint, h2Settings } from '@switchyard/tunnel';
import { progress, report } from '../report.ts';
import { type OpenStream, interleaved, rate, streamBytes } from '../tunnel/streams.ts';

const TOKEN = 'bench-token';
const ONE_STREAM_BYTES = 512 * 1024 * 1024;
const WARMUP_BYTES = 32 * 1024 * 1024;
const ROUNDS = 4;

async function main(): Promise<void> {
  const certificate = certificateFor127();
  if ('missing' in certificate) {
    progress(`skipped: ${certificate.missing}`);
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-bench-tls-'));
  const certFile = join(dir, 'tls.crt');
  const keyFile = join(dir, 'tls.key');
  writeFileSync(certFile, certificate.cert);
  writeFileSync(keyFile, certificate.key);
  const endpoint = createTunnelEndpoint({ tokens: () => [TOKEN], maxRuntimes: 2 });
  const refuse = (_req: http.IncomingMessage, res: http.ServerResponse): void => void res.writeHead(404).end();
  const plain = http.createServer(refuse);
  const secure = https.createServer({ cert: certificate.cert, key: certificate.key }, refuse);
  for (const server of [plain, secure]) {
    server.on('upgrade', (req, socket, head) => endpoint.handleUpgrade(req, socket, head));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
  }
  const port = (server: http.Server): number => (server.address() as AddressInfo).port;
  const child = spawn(
    process.execPath,
    [
      join(import.meta.dirname, 'runtime.ts'),
      `http://127.0.0.1:${port(plain)}`,
      `https://127.0.0.1:${port(secure)}`,
      TOKEN,
      certFile,
      keyFile,
    ],
    { stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, NODE_EXTRA_CA_CERTS: certFile } },
  );
  try {
    const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
    const { h2TlsPort } = JSON.parse(line) as { h2TlsPort: number };
    const overTls: OpenStream = (headers) => endpoint.get('tls')!.request(headers);
    const overPlain: OpenStream = (headers) => endpoint.get('plain')!.request(headers);
    const h2 = http2.connect(`https://127.0.0.1:${h2TlsPort}`, {
      ca: certificate.cert,
      settings: h2Settings('scheduler'),
      maxSessionMemory: H2_TUNING.maxSessionMemoryMb,
    });
    await once(h2, 'connect');
    h2.setLocalWindowSize(H2_TUNING.sessionWindowBytes);
    const overH2Tls: OpenStream = (headers) => h2.request(headers);
    progress(`runtime connected: tunnels over ${endpoint.get('tls')!.transport} on TLS and on plain TCP`);

    for (const open of [overTls, overPlain, overH2Tls]) await streamBytes(open, WARMUP_BYTES);
    const [tls, tunnel, h2Tls] = (
      await interleaved(
        ROUNDS,
        () => streamBytes(overTls, ONE_STREAM_BYTES / ROUNDS),
        () => streamBytes(overPlain, ONE_STREAM_BYTES / ROUNDS),
        () => streamBytes(overH2Tls, ONE_STREAM_BYTES / ROUNDS),
      )
    ).map((ms) => rate(ONE_STREAM_BYTES, ms)) as [number, number, number];
    progress(
      `one stream: ${tls.toFixed(0)} MB/s through the TLS tunnel, ${tunnel.toFixed(0)} MB/s through the plain one`,
    );
    progress(`one HTTP/2 stream over TLS, no tunnel: ${h2Tls.toFixed(0)} MB/s`);
    h2.close();
    report('tunnel-tls', [
      { metric: 'tls_tunnel_one_stream_throughput', value: tls, unit: 'MB/s' },
      { metric: 'tunnel_one_stream_throughput', value: tunnel, unit: 'MB/s' },
      { metric: 'h2_tls_one_stream_throughput', value: h2Tls, unit: 'MB/s' },
      { metric: 'tls_tunnel_vs_tunnel', value: tls / tunnel, unit: 'ratio' },
      { metric: 'tls_tunnel_vs_h2_tls', value: tls / h2Tls, unit: 'ratio' },
    ]);
  } finally {
    child.stdin!.end();
    endpoint.close();
    for (const server of [plain, secure]) {
      server.closeAllConnections();
      server.close();
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
