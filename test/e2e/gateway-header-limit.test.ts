// The gateway binary's limit on request headers (--header-bytes-max) is the
// one its clients meet, whatever Node's own parser would take: a block under
// it is served (a large JWT or cookie, which the gateway reads and never
// forwards). No scheduler is needed: the headers are checked, and the
// body read, before a request is routed.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnApp, type AppProcess } from '../support/processes.ts';

const HEADER_BYTES_MAX = 64 * 1024;

/** A POST whose body is not JSON: 400 once past the header gates, without a scheduler. */
async function postGarbage(port: number, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://127.0.0.1:${port}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: 'not json',
  });
  return { status: res.status, body: await res.text() };
}

describe('the gateway binary and its header limit', () => {
  let gateway: AppProcess;
  before(async () => {
    gateway = await spawnApp('gateway', 'gw-header-limit', [
      ...['--host', '127.0.0.1', '--port', '0', '--schedulers', 'http://127.0.0.1:1', '--drain-delay-ms', '0'],
      ...['--header-bytes-max', String(HEADER_BYTES_MAX)],
    ]);
  });
  after(() => gateway?.stop());

  it('takes a header block past Node’s default 16 KiB while under --header-bytes-max', async () => {
    const answer = await postGarbage(gateway.port!, { 'x-pad': 'a'.repeat(32 * 1024) });
    assert.equal(answer.status, 400, answer.body);
    assert.match(answer.body, /"code":-32700/);
  });
});
