// The memory baseline of the gateway bench's idle phase: a bare Node HTTP
// server that answers every GET with an event stream's head and holds it
// open, run with the gateway's Node options. Prints its port, then serves
// until stdin closes.
import http from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';

const server = http.createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  res.flushHeaders();
});
// As the gateway app: streams may stay open for hours.
server.requestTimeout = 0;
server.listen(0, '127.0.0.1');
await once(server, 'listening');
process.stdout.write(`${(server.address() as AddressInfo).port}\n`);
process.stdin.once('end', () => process.exit(0));
process.stdin.resume();
