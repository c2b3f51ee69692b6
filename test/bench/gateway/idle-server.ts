// The memory baseline of the gateway bench's idle phase: a bare Node HTTP
// server that answers every GET with an event stream's head and holds it
// open, run with the gateway's environment. Prints its port, then serves
// until stdin closes.
import http from 'node:http';
import { serveUntilStdinEnds } from './serve-child.ts';

const server = http.createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  res.flushHeaders();
});
await serveUntilStdinEnds(server);
