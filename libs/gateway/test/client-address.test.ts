import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { SwitchyardError } from '@switchyard/protocol';
import { createGateway } from '@switchyard/gateway';
import { TrustedProxies, trustedProxyProblem } from '../src/client-address.ts';
import { startHarness } from './harness.ts';
import type { Harness } from './harness.ts';

/** The two fields clientOf reads, as a request from `peer` carrying `forwarded` would have them. */
function request(peer: string, forwarded?: string): IncomingMessage {
  return {
    socket: { remoteAddress: peer },
    headers: forwarded === undefined ? {} : { 'x-forwarded-for': forwarded },
  } as unknown as IncomingMessage;
}

describe('TrustedProxies', () => {
  const proxies = new TrustedProxies(['10.0.0.0/8', '192.168.1.7', 'fd00::/8']);

  const cases: { name: string; peer: string; forwarded?: string; client: string }[] = [
    {
      name: 'an untrusted peer is the client, whatever it forwards',
      peer: '203.0.113.9',
      forwarded: '1.2.3.4',
      client: '203.0.113.9',
    },
    { name: 'a trusted peer without the header is the client', peer: '10.1.2.3', client: '10.1.2.3' },
    { name: 'a trusted peer names the client', peer: '10.1.2.3', forwarded: '198.51.100.4', client: '198.51.100.4' },
    {
      name: 'addresses the client put in front of the real one are ignored',
      peer: '10.1.2.3',
      forwarded: '1.1.1.1, 2.2.2.2, 198.51.100.4',
      client: '198.51.100.4',
    },
    {
      name: 'a chain of trusted proxies is walked to the first address outside it',
      peer: '192.168.1.7',
      forwarded: '1.1.1.1, 198.51.100.4, 10.9.9.9',
      client: '198.51.100.4',
    },
    {
      name: 'a hop that is not an address stops the walk at the last one read',
      peer: '10.1.2.3',
      forwarded: 'garbage, 10.9.9.9',
      client: '10.9.9.9',
    },
    {
      name: 'an IPv4-mapped peer is read as IPv4',
      peer: '::ffff:10.1.2.3',
      forwarded: '198.51.100.4',
      client: '198.51.100.4',
    },
    { name: 'IPv6 proxies and clients', peer: 'fd00::1', forwarded: '2001:db8::7', client: '2001:db8::7' },
    {
      name: 'an IPv4-mapped client is read as IPv4',
      peer: '10.1.2.3',
      forwarded: '::ffff:198.51.100.4',
      client: '198.51.100.4',
    },
    // Some cloud load balancers write each hop with its port.
    {
      name: 'an IPv4 hop with a port is read as its address',
      peer: '10.1.2.3',
      forwarded: '203.0.113.7:4711',
      client: '203.0.113.7',
    },
    {
      name: 'a bracketed IPv6 hop, with or without a port, is read as its address',
      peer: '10.1.2.3',
      forwarded: '[2001:db8::1]:4711, [2001:db8::2]',
      client: '2001:db8::2',
    },
    {
      name: 'trusted hops with ports are walked past too',
      peer: '10.1.2.3',
      forwarded: '[2001:db8::1]:4711, 10.9.9.9:80, [fd00::5]:443',
      client: '2001:db8::1',
    },
    {
      name: 'a hop with a port that is no address still stops the walk',
      peer: '10.1.2.3',
      forwarded: '198.51.100.4, 1.2.3:80, 10.9.9.9',
      client: '10.9.9.9',
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      assert.equal(proxies.clientOf(request(c.peer, c.forwarded)), c.client);
    });
  }

  it('trusts no one when given no entries', () => {
    assert.equal(new TrustedProxies([]).clientOf(request('10.1.2.3', '198.51.100.4')), '10.1.2.3');
  });

  it('refuses entries that are neither an address nor a CIDR block, naming them', () => {
    for (const entry of ['10.0.0.0/33', 'fd00::/129', 'example.com', '10.0.0.0/8/1', '10.0.0.0/x', '']) {
      assert.match(trustedProxyProblem(entry) ?? '', /prefix length|not an IP address/, entry);
      assert.throws(() => new TrustedProxies([entry]), SwitchyardError);
    }
    for (const entry of ['10.0.0.0/8', '0.0.0.0/0', '192.168.1.7', '::1', 'fd00::/8']) {
      assert.equal(trustedProxyProblem(entry), undefined, entry);
    }
    assert.throws(
      () => createGateway({ schedulers: ['http://127.0.0.1:1'], trustedProxies: ['nope'] }),
      /trustedProxies/,
    );
  });
});

/** A `sleep` tool call of `ms` forwarded for `client`, as a proxy in front of the gateway would send it. */
function call(url: string, client: string, ms: number): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/call',
      'mcp-name': 'sleep',
      'x-forwarded-for': client,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: {
        name: 'sleep',
        arguments: { ms },
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
          'io.modelcontextprotocol/clientCapabilities': {},
        },
      },
    }),
  });
}

/**
 * Holds `holder`'s one slot with a call that takes a while, and answers
 * the statuses of a call from `holder` again and one from each of `others`.
 */
async function statusesWhileHeld(
  harness: Harness,
  holder: string,
  others: readonly string[],
): Promise<{ holder: number; others: number[] }> {
  const held = call(harness.url, holder, 400);
  for (let i = 0; i < 400 && harness.runtimes[0]!.running.count < 1; i++) {
    await new Promise((r) => setTimeout(r, 5));
  }
  const again = await call(harness.url, holder, 0);
  const answers = await Promise.all(others.map((client) => call(harness.url, client, 0)));
  await Promise.all([again.text(), ...answers.map((r) => r.text()), held.then((r) => r.text())]);
  return { holder: again.status, others: answers.map((r) => r.status) };
}

describe('the concurrency limit of anonymous clients behind a trusted proxy', () => {
  it('counts each forwarded client apart, and every client of an untrusted peer as one', async () => {
    const h = await startHarness(1, { principalConcurrencyMax: 1, trustedProxies: ['127.0.0.1'] });
    const plain = await startHarness(1, { principalConcurrencyMax: 1 });
    try {
      for (const [harness, other] of [
        [h, 200],
        [plain, 429],
      ] as const) {
        const statuses = await statusesWhileHeld(harness, '198.51.100.1', ['198.51.100.2']);
        assert.equal(statuses.holder, 429, 'the same client past its limit');
        assert.equal(statuses.others[0], other, 'another client behind the same proxy');
      }
    } finally {
      await Promise.all([h.close(), plain.close()]);
    }
  });

  it('counts an IPv6 client by its /64, or by its address at a prefix length of 128', async () => {
    const options = { principalConcurrencyMax: 1, trustedProxies: ['127.0.0.1'] };
    const by64 = await startHarness(1, options);
    const by128 = await startHarness(1, { ...options, clientIpv6PrefixLength: 128 });
    try {
      const sameBlock = '2001:db8:0:1::b';
      const otherBlock = '2001:db8:0:2::a';
      const at64 = await statusesWhileHeld(by64, '2001:db8:0:1::a', [sameBlock, otherBlock]);
      assert.deepEqual(at64, { holder: 429, others: [429, 200] }, 'another address of the same /64 is the same client');
      const at128 = await statusesWhileHeld(by128, '2001:db8:0:1::a', [sameBlock, otherBlock]);
      assert.deepEqual(at128, { holder: 429, others: [200, 200] }, 'each address its own client at 128');
    } finally {
      await Promise.all([by64.close(), by128.close()]);
    }
  });

  it('refuses a prefix length that is no IPv6 prefix', () => {
    for (const clientIpv6PrefixLength of [0, 129, 1.5])
      assert.throws(
        () => createGateway({ schedulers: ['http://127.0.0.1:1'], clientIpv6PrefixLength }),
        /clientIpv6PrefixLength must be 1 to 128/,
      );
  });
});
