// A client GET carrying a header HTTP/1.1 allows but HTTP/2 forbids as
// connection-specific (`HTTP2-Settings`, as `curl --http2` sends on http:
// URLs; a proxy in between may drop the `Connection` that lists it): the
// event stream still opens over the gateway's HTTP/2 connection to the
// scheduler replica, instead of failing before anything was sent with a 502
// blamed on the runtime.
import { once } from 'node:events';
import http2 from 'node:http2';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createGateway } from '@switchyard/gateway';
import type { Gateway } from '@switchyard/gateway';
import { startSchedulerDouble } from './fixtures/scheduler-double.ts';
import type { SchedulerDouble } from './fixtures/scheduler-double.ts';
import { listen, stopServer } from './harness.ts';

describe('an event stream whose client sent HTTP2-Settings', () => {
  let replica: http2.Http2Server;
  let scheduler: SchedulerDouble;
  let gateway: Gateway;
  let server: http.Server;
  let url: string;
  const seen: http2.IncomingHttpHeaders[] = [];

  before(async () => {
    replica = http2.createServer();
    replica.on('stream', (stream, headers) => {
      seen.push(headers);
      stream.respond({ ':status': 200, 'content-type': 'text/event-stream' });
      stream.end('data: hello\n\n');
    });
    replica.listen(0, '127.0.0.1');
    await once(replica, 'listening');
    const address = `http://127.0.0.1:${(replica.address() as AddressInfo).port}`;
    scheduler = await startSchedulerDouble([{ id: 'rt-h2', address }]);
    gateway = createGateway({ schedulers: [scheduler.url], upstreamCheckIntervalMs: 0 });
    ({ server, url } = await listen(gateway));
  });
  after(async () => {
    await stopServer(server);
    await gateway.close();
    replica.close();
    await scheduler.close();
  });

  it('opens the stream without the connection-specific header', async () => {
    const target = new URL(url);
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      http
        .get(
          {
            host: target.hostname,
            port: target.port,
            path: target.pathname,
            agent: false,
            headers: {
              accept: 'text/event-stream',
              'mcp-session-id': 'session-h2',
              'http2-settings': 'AAMAAABkAAQAoAAAAAIAAAAA',
            },
          },
          resolve,
        )
        .on('error', reject);
    });
    let body = '';
    for await (const chunk of res) body += String(chunk);
    assert.equal(res.statusCode, 200, body);
    assert.equal(body, 'data: hello\n\n');
    assert.equal(seen.length, 1);
    assert.equal(seen[0]!['http2-settings'], undefined);
  });
});
