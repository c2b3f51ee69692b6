// What of a sandbox's answer reaches a client through the gateway: a
// stand-in runtime (placed by the scheduler double, reached in direct mode
// over real HTTP on loopback) answers with every header a browser would act
// on for the gateway's whole origin, beside headers about the answer alone.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ORIGIN_WIDE_RESPONSE_HEADERS } from '@switchyard/protocol';
import { gatewayBeforeStandIn, type StandInGateway } from './fixtures/stand-in.ts';
import { INITIALIZE } from './harness.ts';

const ORIGIN_WIDE: Readonly<Record<string, string>> = {
  'set-cookie': 'gateway-session=sandbox-chosen; Path=/; Domain=example.com',
  'set-cookie2': 'gateway-session=sandbox-chosen; Version=1',
  'clear-site-data': '"cookies", "storage"',
  'strict-transport-security': 'max-age=31536000; includeSubDomains',
  nel: '{"report_to":"collector","max_age":31536000}',
  'report-to': '{"group":"collector","max_age":31536000,"endpoints":[{"url":"https://collector.example/r"}]}',
  'alt-svc': 'h2="collector.example:443"; ma=86400',
};
const KEPT: Readonly<Record<string, string>> = { 'cache-control': 'no-store', 'x-sandbox-note': 'kept' };
const BODY = JSON.stringify({ jsonrpc: '2.0', id: 1, result: { stand: 'in' } });

describe("a sandbox's headers that act on the gateway's whole origin", () => {
  let standIn: StandInGateway;
  let url: string;

  before(async () => {
    standIn = await gatewayBeforeStandIn((req, res) => {
      req.resume();
      res.writeHead(200, { ...ORIGIN_WIDE, ...KEPT, 'content-type': 'application/json' });
      res.end(BODY);
    });
    ({ url } = standIn);
  });
  after(() => standIn.close());

  it('lists every header the test sends', () => {
    assert.deepEqual(new Set(Object.keys(ORIGIN_WIDE)), ORIGIN_WIDE_RESPONSE_HEADERS);
  });

  it('are not passed on; the rest of the answer is', async () => {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify(INITIALIZE),
    });
    assert.equal(res.status, 200);
    assert.equal(await res.text(), BODY);
    for (const name of Object.keys(ORIGIN_WIDE)) assert.equal(res.headers.get(name), null, `${name} passed`);
    for (const [name, value] of Object.entries(KEPT)) assert.equal(res.headers.get(name), value, name);
  });
});
