// The latency floor of the gateway bench: the leanest plain proxy we know how
// to build on the gateway's own parts — a bare Node HTTP server that sends
// every request on to one origin through an undici Pool's `dispatch` and
// writes the answer straight into the response from the dispatch callbacks
// (no body stream, no promise per step), with no identity, no routing, no
// security gates and no route cache. Run with the gateway's environment, it
// shows what one more loopback hop through this platform costs on this
// machine; the gateway in direct mode makes that hop and does its own work
// besides. (A proxy on undici's `request()` and `pipeline()` costs about
// 0.1 ms more per hop here, so it would hide that much of the gateway's own
// work.) Usage: passthrough.ts <origin>. Prints its port, then serves until
// stdin closes.
import http from 'node:http';
import { Pool } from 'undici';
import type { Dispatcher } from 'undici';
import { serveUntilStdinEnds } from './serve-child.ts';

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'host', 'content-length']);

const upstream = new Pool(process.argv[2]!, { connections: 64 });

/** Headers less hop-by-hop ones and the length (undici sets it from the body; Node frames the answer itself). */
function forwardable(headers: http.IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
  }
  return out;
}

/** Writes the upstream answer into `res` as it is parsed; a failure cuts the client's response. */
function relayInto(res: http.ServerResponse): Dispatcher.DispatchHandler {
  return {
    // Present so that undici takes this for a handler of its current API.
    onRequestStart() {},
    onResponseStart(_controller, statusCode, headers) {
      res.writeHead(statusCode, forwardable(headers));
    },
    onResponseData(controller, chunk) {
      if (!res.write(chunk)) {
        controller.pause();
        res.once('drain', () => controller.resume());
      }
    },
    onResponseEnd() {
      res.end();
    },
    onResponseError() {
      res.destroy();
    },
  };
}

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    upstream.dispatch(
      {
        path: req.url ?? '/',
        method: req.method as Dispatcher.HttpMethod,
        headers: forwardable(req.headers),
        body: chunks.length > 0 ? Buffer.concat(chunks) : null,
      },
      relayInto(res),
    );
  });
});
await serveUntilStdinEnds(server);
