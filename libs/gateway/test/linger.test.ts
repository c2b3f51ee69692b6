import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startHarness } from './harness.ts';
import type { Harness } from './harness.ts';

const BODY_BYTES_MAX = 2048;

/** Writes `text` on one connection and collects what comes back until `done` says enough, or the socket ends. */
function exchangeRaw(url: string, parts: readonly string[], done: (text: string) => boolean): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      text += chunk;
      if (done(text)) {
        socket.destroy();
        resolve(text);
      }
    });
    socket.on('end', () => resolve(text));
    socket.on('error', reject);
    socket.on('connect', () => {
      for (const part of parts) socket.write(part);
    });
  });
}

const statusLines = (text: string): string[] => text.match(/HTTP\/1\.1 \d{3}/g) ?? [];

describe('a refused body', () => {
  let h: Harness;
  before(async () => {
    h = await startHarness(1, { bodyBytesMax: BODY_BYTES_MAX });
  });
  after(() => h.close());

  it('is read and dropped after the 413, so the connection serves the next request', async () => {
    const size = BODY_BYTES_MAX * 4;
    const head = (length: number): string =>
      `POST /mcp HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\n\r\n`;
    const text = await exchangeRaw(
      h.url,
      [head(size), 'x'.repeat(size), head(2), '{}'],
      (t) => statusLines(t).length >= 2,
    );
    assert.deepEqual(statusLines(text), ['HTTP/1.1 413', 'HTTP/1.1 400']);
  });
});
