// A request that names no process gets a sandbox of its own: a stateless
// (2026-07-28) request one for itself, a legacy session one for the session.
// Nobody can name that sandbox again, so it must go when its request or
// session does; held for its class's expireSeconds (5 min) instead, a 2026
// client that names no process fills every runtime's sandboxesMax within a
// few hundred calls. A gateway, a scheduler and a runtime in this process.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createGateway, type Gateway } from '@switchyard/gateway';
import type { RuntimeNode } from '@switchyard/runtime';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { startReplicas, startRuntime } from '../support/inprocess.ts';
import { until } from '../support/processes.ts';
import { connect, counter, sessionOf, untilSchedulable, whoami, type AnyClient, type Generation } from './support.ts';

describe('sandboxes of requests that name no process', () => {
  let replicas: SchedulerReplica[] = [];
  let runtime: RuntimeNode | undefined;
  let gateway: Gateway | undefined;
  let server: Server | undefined;
  let url = '';
  const sandboxes = (): number => runtime!.stats().sandboxes;

  before(async () => {
    replicas = await startReplicas(1);
    runtime = await startRuntime('rt-0', replicas[0]!.url);
    await untilSchedulable(replicas[0]!.url, 'the runtime is schedulable');
    gateway = createGateway({ schedulers: [replicas[0]!.url], defaultClass: 'demo' });
    server = createServer(gateway.app);
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  });
  after(async () => {
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
    await gateway?.close();
    await runtime?.close();
    await Promise.allSettled(replicas.map((r) => r.close()));
  });

  it("destroys a legacy session's own sandbox when the session ends", async () => {
    const client = await connect('v2', url);
    try {
      await whoami(client);
      assert.equal(sandboxes(), 1);
    } finally {
      await endSession(client);
    }
    await until("the session's sandbox destroyed", () => sandboxes() === 0, 5000);
  });

  it('keeps a named sandbox after its request, for the next request that names it', async () => {
    const held = sandboxes();
    const client = await connect('v2-modern', url, { 'X-Switchyard-Process': 'kept' });
    try {
      assert.equal(await counter(client), 1);
      assert.equal(await counter(client), 2);
      assert.equal(sandboxes(), held + 1);
    } finally {
      await client.close();
    }
  });

  it("keeps a session's own sandbox out of reach of a client naming the session's id as its process", async () => {
    const owner = await connect('v2', url);
    try {
      assert.equal(await counter(owner), 1);
      const naming = { 'X-Switchyard-Process': sessionOf(owner) };
      await assert.rejects(countOnce('v2-modern', url, naming), 'a stateless request naming it is refused');
      await assert.rejects(countOnce('v2', url, naming), /is taken: name another process/, 'as is a session naming it');
      assert.equal(await counter(owner), 2, "the session's sandbox counted its own calls only");
    } finally {
      await endSession(owner);
    }
  });

  it('frees the sandbox of each stateless request as soon as it is answered', async () => {
    const held = sandboxes();
    const client = await connect('v2-modern', url);
    try {
      // More than the runtime's sandboxesMax (10): held, the last ones would find no room.
      for (let i = 0; i < 12; i++) assert.equal(await counter(client), 1, `request ${i} has a fresh sandbox`);
      await until('none of their sandboxes left on the runtime', () => sandboxes() === held, 5000);
    } finally {
      await client.close();
    }
  });
});

/** Connects a client of `generation`, calls counter once and closes it. */
async function countOnce(generation: Generation, url: string, headers: Record<string, string>): Promise<number> {
  const client = await connect(generation, url, headers);
  try {
    return await counter(client);
  } finally {
    await client.close();
  }
}

/** Ends a legacy session with DELETE, as a client that is done with it does, then closes the client. */
async function endSession(client: AnyClient): Promise<void> {
  const transport = (client as unknown as { transport?: { terminateSession?(): Promise<void> } }).transport;
  await transport?.terminateSession?.();
  await client.close();
}
