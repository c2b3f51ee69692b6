// A runtime answering 503 with `X-Switchyard-Proxy-Error: runtime stream
// limit reached` must not pass for the scheduler proxy refusing a request
// because the runtime's tunnel is full: the gateway then answered its own
// JSON-RPC 503, closed its relay connections to the runtime and warned that
// the runtime carries as many streams as it takes. Through `/api/proxy` the
// scheduler drops that header from the runtime's answer, as it does
// `X-Switchyard-Forwarded`; on a relay connection, which it cannot read, the
// gateway knows that a full tunnel is refused at the upgrade. Either way the
// runtime's 503 reaches the client as it is. A replica, a runtime that
// poses, a gateway.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { PROXY_ERRORS, PROXY_ERROR_HEADER } from '@switchyard/protocol';
import { startPosingStack, statelessCall, type PosingStack } from './posing-runtime.ts';

const ANSWER = JSON.stringify({ jsonrpc: '2.0', id: 1, error: { code: -32000, message: 'the runtime is busy' } });

describe('a runtime answering 503 with the proxy error of a full tunnel', () => {
  let stack: PosingStack | undefined;
  let posed = 0;

  before(async () => {
    stack = await startPosingStack({
      answer: (_req, _body, res) => {
        posed++;
        res.writeHead(503, {
          'content-type': 'application/json',
          'retry-after': '1',
          [PROXY_ERROR_HEADER]: PROXY_ERRORS.streamsFull,
        });
        res.end(ANSWER);
      },
    });
  });
  after(() => stack?.close());

  for (const relayConnections of [true, false]) {
    const path = relayConnections ? 'a relay connection' : '/api/proxy';
    it(`reaches the client as the runtime answer it is, through ${path}`, async () => {
      const { url, logs } = await stack!.gatewayWith({ relayConnections });
      const before = posed;
      const res = await statelessCall(url);
      const body = await res.text();
      assert.equal(posed - before, 1, 'the runtime answered');
      assert.equal(res.status, 503);
      assert.equal(body, ANSWER, "the runtime's answer, not the gateway's for a full tunnel");
      assert.deepEqual(
        logs.filter((l) => /as many streams/.test(l.msg)),
        [],
      );
    });
  }
});
