// `Vary` of an answer to a browser page: the gateway's CORS headers depend on
// Origin (`Vary: Origin`), and a sandbox's answer may depend on more (its own
// `Vary`). A cache between them must hear both, or it serves one page's
// answer to another origin, or one representation for another. A stand-in
// runtime (placed by the scheduler double, reached in direct mode over real
// HTTP on loopback) answers with the `Vary` each request asks for.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { gatewayBeforeStandIn, type StandInGateway } from './fixtures/stand-in.ts';
import { INITIALIZE } from './harness.ts';

const PAGE = 'http://localhost:5173';
/** Request header naming the `Vary` lines the stand-in answers with (`|` between lines). */
const ASK = 'x-test-vary';
const BODY = JSON.stringify({ jsonrpc: '2.0', id: 1, result: { stand: 'in' } });

describe('Vary of answers relayed to a page on an allowed origin', () => {
  let standIn: StandInGateway;
  let url: string;

  before(async () => {
    standIn = await gatewayBeforeStandIn(
      (req, res) => {
        req.resume();
        const asked = req.headers[ASK];
        // One header line for each part asked for.
        if (typeof asked === 'string') res.setHeader('vary', asked.split('|'));
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(BODY);
      },
      { allowedOrigins: [PAGE] },
    );
    ({ url } = standIn);
  });
  after(() => standIn.close());

  async function varyOf(headers: Record<string, string>): Promise<string | null> {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
      body: JSON.stringify(INITIALIZE),
      signal: AbortSignal.timeout(10_000),
    });
    assert.equal(res.status, 200, await res.text());
    return res.headers.get('vary');
  }

  const cases: ReadonlyArray<{ name: string; origin: boolean; upstream?: string; expected: string | null }> = [
    { name: 'keeps Origin when the sandbox names no Vary', origin: true, expected: 'Origin' },
    { name: 'adds what the sandbox varies on to Origin', origin: true, upstream: 'Accept', expected: 'Origin, Accept' },
    {
      name: 'names a field once, whatever its case',
      origin: true,
      upstream: 'accept, ORIGIN, Accept-Encoding',
      expected: 'Origin, accept, Accept-Encoding',
    },
    {
      name: 'merges every Vary line of the answer',
      origin: true,
      upstream: 'Accept|Accept-Language',
      expected: 'Origin, Accept, Accept-Language',
    },
    { name: 'says * alone when the sandbox varies on anything', origin: true, upstream: 'Accept, *', expected: '*' },
    { name: "passes a sandbox's Vary as it is without Origin", origin: false, upstream: 'Accept', expected: 'Accept' },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const headers = { ...(c.origin ? { origin: PAGE } : {}), ...(c.upstream ? { [ASK]: c.upstream } : {}) };
      assert.equal(await varyOf(headers), c.expected);
    });
  }
});
