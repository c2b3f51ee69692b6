// The runtime's compat response on a real HTTP/2 session whose byte stream
// the test records flush by flush (each flush is one tunnel message).
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http2 from 'node:http2';
import { duplexPair, type Duplex } from 'node:stream';
import { after, describe, it } from 'node:test';
import { LengthDeclaringResponse } from '../src/response.ts';

interface Frame {
  readonly type: number;
  readonly flags: number;
  readonly streamId: number;
  readonly length: number;
}

const DATA = 0;
const HEADERS = 1;
const END_STREAM = 0x1;

/**
 * Splits the server's output into frames, one list per flush: the writes
 * HTTP/2 makes inside one cork()/uncork() (the tunnel's byte stream sends
 * such a flush as one WebSocket message), or a lone write.
 */
function recordFlushes(stream: Duplex): Frame[][] {
  const flushes: Frame[][] = [];
  let pending = Buffer.alloc(0);
  let open: Frame[] | undefined;
  const write = stream.write.bind(stream) as (chunk: Buffer, ...rest: unknown[]) => boolean;
  const uncork = stream.uncork.bind(stream);
  stream.write = ((chunk: Buffer, ...rest: unknown[]) => {
    pending = Buffer.concat([pending, chunk]);
    const frames: Frame[] = open ?? [];
    while (pending.length >= 9 && pending.length >= 9 + pending.readUIntBE(0, 3)) {
      const length = pending.readUIntBE(0, 3);
      frames.push({ type: pending[3]!, flags: pending[4]!, streamId: pending.readUInt32BE(5) & 0x7fffffff, length });
      pending = pending.subarray(9 + length);
    }
    if (!open) flushes.push(frames);
    if (!open && stream.writableCorked > 0) open = frames;
    return write(chunk, ...rest);
  }) as Duplex['write'];
  stream.uncork = () => {
    uncork();
    if (stream.writableCorked === 0) open = undefined;
  };
  return flushes;
}

type Handler = (req: http2.Http2ServerRequest, res: LengthDeclaringResponse) => void;

interface Exchange {
  readonly headers: http2.IncomingHttpHeaders;
  readonly body: string;
  readonly trailers: http2.IncomingHttpHeaders | undefined;
  /** The server's flushes that carried frames of the request's stream. */
  readonly writes: Frame[][];
}

const sessions: http2.ClientHttp2Session[] = [];
after(() => {
  for (const session of sessions) session.destroy();
});

async function exchange(handler: Handler, method = 'GET'): Promise<Exchange> {
  const [clientSide, serverSide] = duplexPair();
  const writes = recordFlushes(serverSide);
  const server = http2.createServer({ Http2ServerResponse: LengthDeclaringResponse }, handler as never);
  server.emit('connection', serverSide);
  const session = http2.connect('http://runtime', { createConnection: () => clientSide });
  sessions.push(session);
  const stream = session.request({ ':method': method, ':path': '/', te: 'trailers' });
  let body = '';
  let trailers: http2.IncomingHttpHeaders | undefined;
  stream.on('data', (chunk: Buffer) => (body += chunk.toString()));
  stream.once('trailers', (t: http2.IncomingHttpHeaders) => (trailers = t));
  // Both listeners attach now: a whole answer can end the stream in the read that brings its headers.
  const closed = once(stream, 'close');
  const [headers] = (await once(stream, 'response')) as [http2.IncomingHttpHeaders];
  await closed;
  const id = stream.id!;
  return { headers, body, trailers, writes: writes.filter((w) => w.some((f) => f.streamId === id)) };
}

describe('LengthDeclaringResponse', () => {
  it('sends a whole body with its headers, length and END_STREAM in one flush', async () => {
    const seen = await exchange((_req, res) => {
      res.setHeader('content-type', 'text/event-stream');
      res.end('event: message\ndata: {}\n\n');
    });
    assert.equal(seen.body, 'event: message\ndata: {}\n\n');
    assert.equal(seen.headers['content-length'], String(Buffer.byteLength(seen.body)));
    assert.equal(seen.writes.length, 1, `frames of the answer in ${seen.writes.length} flushes`);
    const [headers, data, ...rest] = seen.writes[0]!.filter((f) => f.streamId !== 0);
    assert.equal(headers?.type, HEADERS);
    assert.equal(data?.type, DATA);
    assert.equal(data!.flags & END_STREAM, END_STREAM, 'END_STREAM rides on the body');
    assert.deepEqual(rest, []);
  });

  it('keeps trailers added before end(), and then leaves the length out', async () => {
    const seen = await exchange((_req, res) => {
      res.addTrailers({ 'x-checksum': 'abc' });
      res.end('body');
    });
    assert.equal(seen.body, 'body');
    assert.equal(seen.trailers?.['x-checksum'], 'abc');
    assert.equal(seen.headers['content-length'], undefined);
  });

  it('leaves an answer whose headers went out first to compat (body intact, no length)', async () => {
    const seen = await exchange((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('late');
    });
    assert.equal(seen.body, 'late');
    assert.equal(seen.headers['content-length'], undefined);
  });

  it('declares the length of a HEAD answer without sending a body', async () => {
    const seen = await exchange((_req, res) => void res.end('hello'), 'HEAD');
    assert.equal(seen.body, '');
    assert.equal(seen.headers['content-length'], '5');
  });

  it('gives no length to a 204', async () => {
    const seen = await exchange((_req, res) => {
      res.statusCode = 204;
      res.end('');
    });
    assert.equal(seen.headers[':status'], 204);
    assert.equal(seen.headers['content-length'], undefined);
  });
});
