// The runtime half of the tunnel-tls bench, in its own process so both ends
// get a core: one runtime dialling two tunnels to the same scheduler process,
// `plain` to its HTTP port and `tls` to its own TLS port, and serving the same
// handler on HTTP/2 over TLS with no tunnel (the baseline).
// argv: <plain scheduler url> <tls scheduler url> <token> <cert file> <key file>;
// the scheduler's CA comes through NODE_EXTRA_CA_CERTS. Prints {"h2TlsPort"}
// once both tunnels are up; exits when stdin closes.
import { readFileSync } from 'node:fs';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';
import { H2_TUNING, dialTunnel, h2Settings } from '@switchyard/tunnel';
import { serveBytes } from '../tunnel/streams.ts';

const [plainUrl, tlsUrl, token, certFile, keyFile] = process.argv.slice(2) as [string, string, string, string, string];

const h2Tls = http2.createSecureServer(
  {
    cert: readFileSync(certFile),
    key: readFileSync(keyFile),
    settings: h2Settings('runtime'),
    maxSessionMemory: H2_TUNING.maxSessionMemoryMb,
  },
  (req, res) => void serveBytes(req, res),
);
h2Tls.on('session', (session) =>
  session.once('connect', () => session.setLocalWindowSize(H2_TUNING.sessionWindowBytes)),
);
h2Tls.listen(0, '127.0.0.1');
await once(h2Tls, 'listening');

const tunnels = { plain: plainUrl, tls: tlsUrl };
let connected = 0;
const dialers = Object.entries(tunnels).map(([id, url]) =>
  dialTunnel({
    url,
    token,
    transport: 'http2',
    info: { id, classes: ['bench'], metadata: {}, version: '1.0.0', limits: {} },
    handler: (req, res) => void serveBytes(req, res),
    onConnected: () => {
      if (++connected !== Object.keys(tunnels).length) return;
      process.stdout.write(`${JSON.stringify({ h2TlsPort: (h2Tls.address() as AddressInfo).port })}\n`);
    },
  }),
);
process.stdin.once('end', () => {
  for (const dialer of dialers) void dialer.close();
  process.exit(0);
});
process.stdin.resume();
