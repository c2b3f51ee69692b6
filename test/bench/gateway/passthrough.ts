// The latency floor of the gateway bench: a plain proxy on Node and undici —
// a bare Node HTTP server that sends every request on to one origin with an
// undici Pool (`request`, then `pipeline` into the response) and streams the
// answer back, with no identity, no routing, no security gates and no route
// cache. Run with the gateway's environment, it shows what one more loopback
// hop through this platform costs on this machine; the gateway in direct
// mode makes that hop and does its own work besides. Usage: passthrough.ts
// <origin>. Prints its port, then serves until stdin closes.
import http from 'node:http';
import { serveUntilStdinEnds } from './serve-child.ts';
import { pipeline } from 'node:stream/promises';
import { Pool } from 'undici';

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'host']);

const upstream = new Pool(process.argv[2]!, { connections: 64 });

/** The request's headers less hop-by-hop ones and the length, which undici sets from the body it sends. */
function forwardable(headers: http.IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || name === 'content-length') continue;
    out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

const server = http.createServer((req, res) => {
  void (async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const answer = await upstream.request({
      path: req.url ?? '/',
      method: req.method as 'GET' | 'POST' | 'DELETE',
      headers: forwardable(req.headers),
      body: chunks.length > 0 ? Buffer.concat(chunks) : null,
    });
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(answer.headers)) {
      if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
    }
    res.writeHead(answer.statusCode, headers);
    await pipeline(answer.body, res);
  })().catch(() => res.destroy());
});
await serveUntilStdinEnds(server);
