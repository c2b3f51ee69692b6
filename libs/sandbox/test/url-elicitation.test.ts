// A proxied server's URL-mode elicitation (2025-11-25) reaches a legacy client that declared URL
// elicitation, and the server's later notifications/elicitation/complete reaches that client, and only it
// (the spec has the server send it to the client that was asked). Real SDK clients, a real stdio child (an
// SDK server that asks its client to visit a URL, then says the visit is over).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Client, type ClientCapabilities } from '@modelcontextprotocol/client';
import { askingClass, textOf } from './fixtures/asking.ts';
import { hostSuite } from './fixtures/suite.ts';

describe('a proxied server asking a legacy client to visit a URL', () => {
  const suite = hostSuite({ runtimeId: 'rt-url-elicitation', classes: { asking: askingClass() } });

  /** A legacy client of sandbox `process` that accepts every URL it is asked to visit and notes what it hears. */
  async function legacyClient(process: string, capabilities: ClientCapabilities) {
    const client = new Client({ name: `url-${process}`, version: '1.0.0' }, { capabilities });
    const heard: { visited: string[]; completed: string[] } = { visited: [], completed: [] };
    client.setRequestHandler('elicitation/create', (req) => {
      heard.visited.push(req.params.mode === 'url' ? `${req.params.elicitationId} ${req.params.url}` : 'form');
      return { action: 'accept' };
    });
    client.setNotificationHandler('notifications/elicitation/complete', (n) => {
      heard.completed.push(n.params.elicitationId);
    });
    await suite.connect(client, { 'x-switchyard-class': 'asking', 'x-switchyard-process': process });
    return { client, heard };
  }

  it('a client that declared URL elicitation is asked to visit the URL', async () => {
    const { client, heard } = await legacyClient('visit', { elicitation: { form: {}, url: {} } });
    assert.equal(textOf(await client.callTool({ name: 'link', arguments: { id: 'e-1' } })), 'e-1: accept');
    assert.deepEqual(heard.visited, ['e-1 https://example.com/sign-in/e-1']);
  });

  it("the server's word that the visit is over reaches the client it asked, not another session of the sandbox", async () => {
    const asked = await legacyClient('complete', { elicitation: { form: {}, url: {} } });
    const other = await legacyClient('complete', { elicitation: { form: {}, url: {} } });
    assert.equal(textOf(await asked.client.callTool({ name: 'link', arguments: { id: 'e-3' } })), 'e-3: accept');
    assert.deepEqual(asked.heard.completed, ['e-3']);
    // Sent before the call's result, it came on the call's stream: nothing is still on its way to the other.
    assert.equal(textOf(await other.client.callTool({ name: 'outcomes', arguments: {} })), '[]');
    assert.deepEqual(other.heard.completed, []);
  });

  it('a client that declared the form mode only has the URL refused, as it would refuse it', async () => {
    const { client, heard } = await legacyClient('form-only', { elicitation: { form: {} } });
    const text = textOf(await client.callTool({ name: 'link', arguments: { id: 'e-2' } }));
    assert.match(text, /^e-2: refused: .*url elicitation/i);
    assert.deepEqual(heard.visited, []);
  });
});
