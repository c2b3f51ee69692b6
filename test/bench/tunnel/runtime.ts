// The runtime half of the tunnel bench, in its own process so both ends get a
// core. It serves one handler five ways: through two tunnels (runtime `bench`
// on the default transport, `bench-ws` on the WebSocket one), over HTTP/2 on
// a plain TCP connection with the tunnel's settings (HTTP/2 with no tunnel
// around it), over plain HTTP/1.1 (the latency baseline) and a raw TCP
// blaster (the throughput baseline).
// argv: <scheduler url> <token>. Prints {"httpPort","h2Port","tcpPort"} once connected.
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';
import { H2_TUNING, dialTunnel, h2Settings } from '@switchyard/tunnel';
import { serveBytes } from './streams.ts';

const [url, token] = process.argv.slice(2) as [string, string];
const plain = http.createServer((req, res) => void serveBytes(req, res));
plain.listen(0, '127.0.0.1');
// Raw TCP: the client sends the byte count as text, the server blasts that many bytes.
const CHUNK = Buffer.alloc(256 * 1024, 0x61);
const blaster = net.createServer((socket) => {
  socket.once('data', async (data) => {
    let left = Number(data.toString());
    while (left > 0) {
      const piece = left >= CHUNK.length ? CHUNK : CHUNK.subarray(0, left);
      left -= piece.length;
      if (!socket.write(piece)) await once(socket, 'drain');
    }
    socket.end();
  });
});
blaster.listen(0, '127.0.0.1');
// The tunnel's HTTP/2 settings, as the dialer's server advertises them.
const h2 = http2.createServer(
  { settings: h2Settings('runtime'), maxSessionMemory: H2_TUNING.maxSessionMemoryMb },
  (req, res) => void serveBytes(req, res),
);
h2.on('session', (session) => session.once('connect', () => session.setLocalWindowSize(H2_TUNING.sessionWindowBytes)));
h2.listen(0, '127.0.0.1');
await Promise.all([once(plain, 'listening'), once(blaster, 'listening'), once(h2, 'listening')]);

// Two tunnels to the same scheduler: the default transport (HTTP/2 straight on
// the upgraded connection) and the WebSocket fallback.
const transports = { bench: 'auto', 'bench-ws': 'websocket' } as const;
let connected = 0;
const dialers = Object.entries(transports).map(([id, transport]) =>
  dialTunnel({
    url,
    token,
    transport,
    info: { id, classes: ['bench'], metadata: {}, version: '1.0.0', limits: {} },
    handler: (req, res) => void serveBytes(req, res),
    onConnected: () => {
      if (++connected !== Object.keys(transports).length) return;
      const ports = {
        httpPort: (plain.address() as AddressInfo).port,
        h2Port: (h2.address() as AddressInfo).port,
        tcpPort: (blaster.address() as AddressInfo).port,
      };
      process.stdout.write(`${JSON.stringify(ports)}\n`);
    },
  }),
);
process.stdin.once('end', () => {
  for (const dialer of dialers) void dialer.close();
  process.exit(0);
});
process.stdin.resume();
