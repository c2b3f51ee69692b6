import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { SandboxHost, SandboxInstance } from '@switchyard/sandbox';
import { DeathFlag } from '../src/engine.ts';
import { serveHttp1, testHost, type Served } from './fixtures/harness.ts';

/**
 * A sandbox whose sessions' transports throw on the first request they are
 * handed (the initialize), as an SDK transport does on an internal fault.
 */
const faulty = {
  create: async (): Promise<SandboxInstance> => {
    const death = new DeathFlag();
    return {
      capabilities: {},
      bind() {},
      register(server) {
        const connect = server.connect.bind(server);
        server.connect = async (transport) => {
          await connect(transport);
          (transport as unknown as { handleRequest: () => Promise<never> }).handleRequest = async () => {
            throw new Error('transport fault');
          };
        };
        return () => {};
      },
      get dead() {
        return death.dead;
      },
      onDead: (listener) => death.onDead(listener),
      destroy: async () => death.kill(),
    };
  },
};

/** A sandbox that cannot install its surface on a session's server (`register` throws). */
const unregistrable = {
  create: async (): Promise<SandboxInstance> => {
    const death = new DeathFlag();
    return {
      capabilities: {},
      bind() {},
      register() {
        throw new Error('register fault');
      },
      get dead() {
        return death.dead;
      },
      onDead: (listener) => death.onDead(listener),
      destroy: async () => death.kill(),
    };
  },
};

function initialize(url: string, className: string): Promise<Response> {
  return fetch(`${url}/mcp`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'x-switchyard-class': className,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
    }),
  });
}

describe('an initialize that fails inside the runtime', () => {
  let host: SandboxHost;
  let served: Served;

  before(async () => {
    host = testHost({
      runtimeId: 'rt-faulty',
      classes: {
        faulty: { engine: 'custom', name: 'faulty' },
        unregistrable: { engine: 'custom', name: 'unregistrable' },
      },
      engines: { faulty, unregistrable },
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
    assert.deepEqual(
      { sessions: host.stats().sessions, sandboxes: host.stats().sandboxes },
      { sessions: 0, sandboxes: 0 },
    );
  });

  it('whose sandbox cannot register its surface is answered 500 and leaves the sandbox unheld', async () => {
    const response = await initialize(served.url, 'unregistrable');
    assert.equal(response.status, 500);
    await response.text();
    assert.deepEqual(
      { sessions: host.stats().sessions, sandboxes: host.stats().sandboxes },
      { sessions: 0, sandboxes: 0 },
    );
  });
});
