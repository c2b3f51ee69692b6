import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { SandboxHost, SandboxInstance } from '@switchyard/sandbox';
import { DeathFlag } from '../src/engine.ts';
import { serveHttp1, testHost, type Served } from './fixtures/harness.ts';

/** An engine whose sandboxes have no surface of their own and install themselves with `register`. */
function engineWith(register: SandboxInstance['register']) {
  return {
    create: async (): Promise<SandboxInstance> => {
      const death = new DeathFlag();
      return {
        capabilities: {},
        bind() {},
        register,
        get dead() {
          return death.dead;
        },
        onDead: (listener) => death.onDead(listener),
        destroy: async () => death.kill(),
      };
    },
  };
}

/** Replaces a method of each session's transport once the server is connected to it. */
function onTransport(name: 'handleRequest' | 'onmessage', replacement: () => never): SandboxInstance['register'] {
  return (server) => {
    const connect = server.connect.bind(server);
    server.connect = async (transport) => {
      await connect(transport);
      (transport as unknown as Record<string, unknown>)[name] = replacement;
    };
    return () => {};
  };
}

const fault = (what: string) => () => {
  throw new Error(what);
};

/** Sessions whose transports throw on the first request they are handed, as on an internal fault. */
const faulty = engineWith(onTransport('handleRequest', fault('transport fault')));
/**
 * Sessions whose servers throw on the first message their transport hands
 * them, after it gave the session its id: the SDK transport answers that
 * 400 "Parse error", and the client learns no id.
 */
const garbling = engineWith(onTransport('onmessage', fault('dispatch fault')));
/** A sandbox that cannot install its surface on a session's server. */
const unregistrable = engineWith(fault('register fault'));

const PARAMS = { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } };

function post(url: string, className: string, body: unknown): Promise<Response> {
  return fetch(`${url}/mcp`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'x-switchyard-class': className,
    },
    body: JSON.stringify(body),
  });
}

const initialize = (url: string, className: string) =>
  post(url, className, { jsonrpc: '2.0', id: 1, method: 'initialize', params: PARAMS });

describe('an initialize that fails inside the runtime', () => {
  let host: SandboxHost;
  let served: Served;
  const held = () => ({ sessions: host.stats().sessions, sandboxes: host.stats().sandboxes });

  before(async () => {
    host = testHost({
      runtimeId: 'rt-faulty',
      classes: {
        demo: { engine: 'builtin' },
        faulty: { engine: 'custom', name: 'faulty' },
        garbling: { engine: 'custom', name: 'garbling' },
        unregistrable: { engine: 'custom', name: 'unregistrable' },
      },
      engines: { faulty, garbling, unregistrable },
    });
    served = await serveHttp1(host);
  });
  after(async () => {
    await served.close();
    await host.close();
  });

  it('on which the transport throws is answered 500 and leaves no session holding its sandbox', async () => {
    const response = await initialize(served.url, 'faulty');
    assert.equal(response.status, 500);
    await response.text();
    assert.deepEqual(held(), { sessions: 0, sandboxes: 0 });
  });

  it('whose sandbox cannot register its surface is answered 500 and leaves the sandbox unheld', async () => {
    const response = await initialize(served.url, 'unregistrable');
    assert.equal(response.status, 500);
    await response.text();
    assert.deepEqual(held(), { sessions: 0, sandboxes: 0 });
  });

  it('that the transport answers 400 after naming the session leaves no session holding its sandbox', async () => {
    const response = await initialize(served.url, 'garbling');
    assert.equal(response.status, 400);
    assert.match(await response.text(), /Parse error/);
    assert.deepEqual(held(), { sessions: 0, sandboxes: 0 });
  });
});

/** A host serving class demo on an engine that counts the sandboxes it creates, on HTTP/1.1. */
interface CountingHost {
  readonly host: SandboxHost;
  readonly served: Served;
  /** Sandboxes created so far. */
  readonly created: number;
  close(): Promise<void>;
}

async function countingHost(runtimeId: string): Promise<CountingHost> {
  let created = 0;
  const counted = {
    create: async (): Promise<SandboxInstance> => {
      created++;
      return engineWith(() => () => {}).create();
    },
  };
  const host = testHost({ runtimeId, classes: { demo: { engine: 'custom', name: 'counted' } }, engines: { counted } });
  const served = await serveHttp1(host);
  return {
    host,
    served,
    get created() {
      return created;
    },
    close: async () => {
      await served.close();
      await host.close();
    },
  };
}

describe('an initialize sent as a notification (no id)', () => {
  let counting: CountingHost;
  before(async () => {
    counting = await countingHost('rt-notified');
  });
  after(() => counting.close());

  // Taken, the transport would name a session for it and answer 202 without the name: nobody could reach it.
  it('is refused 400 before any sandbox is started', async () => {
    const response = await post(counting.served.url, 'demo', { jsonrpc: '2.0', method: 'initialize', params: PARAMS });
    assert.equal(response.status, 400);
    const body = (await response.json()) as { error?: { message?: string } };
    assert.match(body.error?.message ?? '', /initialize is a request: it needs an id/);
    assert.equal(response.headers.get('mcp-session-id'), null);
    assert.equal(counting.created, 0, 'no sandbox was started for it');
    assert.deepEqual(
      { sessions: counting.host.stats().sessions, sandboxes: counting.host.stats().sandboxes },
      { sessions: 0, sandboxes: 0 },
    );
  });
});

describe('a request the SDK transport refuses for its headers', () => {
  let counting: CountingHost;
  before(async () => {
    counting = await countingHost('rt-refusing');
  });
  after(() => counting.close());

  const INITIALIZE = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: PARAMS });
  const MODERN_CALL = JSON.stringify({
    jsonrpc: '2.0',
    id: 2,
    method: 'tools/list',
    params: {
      _meta: {
        'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/clientInfo': { name: 't', version: '1' },
        'io.modelcontextprotocol/clientCapabilities': {},
      },
    },
  });
  const BOTH = 'application/json, text/event-stream';
  // A named process, as a gateway asserts it: a sandbox started for it would be kept for expireSeconds.
  const cases = [
    {
      what: 'an initialize that does not accept event streams',
      body: INITIALIZE,
      accept: 'application/json',
      type: 'application/json',
      status: 406,
    },
    { what: 'an initialize that is not sent as JSON', body: INITIALIZE, accept: BOTH, type: 'text/plain', status: 415 },
    {
      what: 'a 2026-07-28 request that is not sent as JSON',
      body: MODERN_CALL,
      accept: BOTH,
      type: 'text/plain',
      status: 415,
      modern: true,
    },
  ];
  for (const [i, c] of cases.entries()) {
    it(`answers ${c.what} ${c.status} before any sandbox is started`, async () => {
      const createdBefore = counting.created;
      const response = await fetch(`${counting.served.url}/mcp`, {
        method: 'POST',
        headers: {
          'content-type': c.type,
          accept: c.accept,
          'x-switchyard-class': 'demo',
          'x-switchyard-process': `named-by-gateway-${i}`,
          ...(c.modern ? { 'mcp-protocol-version': '2026-07-28' } : {}),
        },
        body: c.body,
      });
      assert.equal(response.status, c.status);
      const body = (await response.json()) as { error?: { message?: string } };
      assert.match(body.error?.message ?? '', c.status === 406 ? /Not Acceptable/ : /Unsupported Media Type/);
      assert.equal(counting.created - createdBefore, 0, 'no sandbox was started for it');
      assert.deepEqual(
        { sessions: counting.host.stats().sessions, sandboxes: counting.host.stats().sandboxes },
        { sessions: 0, sandboxes: 0 },
      );
    });
  }
});
