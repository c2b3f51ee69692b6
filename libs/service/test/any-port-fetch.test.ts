// anyPortFetch answers as fetch does where Switchyard relies on it — statuses, headers, a streamed body,
// redirects, failures ("fetch failed" with the socket's error as cause), an abort's reason — reaches a
// port fetch refuses, and goes through the agent a caller keeps for a peer. Against real servers on loopback.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { anyPortFetch } from '@switchyard/service';
import { FETCH_BLOCKED_PORTS, onBlockedPort } from '@switchyard/service/testing';

function serve(port = 0): Promise<Server> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url === '/moved') return void res.writeHead(307, { location: '/echo' }).end();
      if (req.url === '/seen') return void res.writeHead(303, { location: '/echo' }).end();
      if (req.url === '/hang') return void res.writeHead(200).write('first ');
      if (req.url?.startsWith('/away?to=')) return void res.writeHead(307, { location: req.url.slice(9) }).end();
      const answer = {
        method: req.method,
        url: req.url,
        body: Buffer.concat(chunks).toString(),
        auth: req.headers.authorization,
      };
      res.writeHead(201, { 'content-type': 'application/json', 'x-one': 'a' }).end(JSON.stringify(answer));
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

async function close(server: Server | undefined): Promise<void> {
  if (!server) return;
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
}

/** An agent that counts the connections it made. */
class CountingAgent extends Agent {
  connections = 0;
  override createConnection(...args: Parameters<Agent['createConnection']>): ReturnType<Agent['createConnection']> {
    this.connections++;
    return super.createConnection(...args);
  }
}

describe('anyPortFetch', () => {
  let server: Server;
  let base: string;
  before(async () => {
    server = await serve();
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => close(server));

  it('sends the method, headers and body, and answers the status, headers and body', async () => {
    const res = await anyPortFetch(`${base}/echo`, {
      method: 'POST',
      headers: { authorization: 'Bearer t' },
      body: 'hi',
    });
    assert.equal(res.status, 201);
    assert.equal(res.headers.get('x-one'), 'a');
    assert.deepEqual(await res.json(), { method: 'POST', url: '/echo', body: 'hi', auth: 'Bearer t' });
  });

  it('follows a 307 with the method and body, a 303 as a GET; answers either with redirect "manual"', async () => {
    assert.deepEqual(await (await anyPortFetch(`${base}/moved`, { method: 'POST', body: 'x' })).json(), {
      method: 'POST',
      url: '/echo',
      body: 'x',
    });
    assert.deepEqual(await (await anyPortFetch(`${base}/seen`, { method: 'POST', body: 'x' })).json(), {
      method: 'GET',
      url: '/echo',
      body: '',
    });
    assert.equal((await anyPortFetch(`${base}/moved`, { redirect: 'manual' })).status, 307);
  });

  it('fails as fetch does: "fetch failed" with the connection error as its cause', async () => {
    const failure = await anyPortFetch('http://127.0.0.1:1/').catch((e: unknown) => e);
    assert.ok(failure instanceof TypeError);
    assert.equal(failure.message, 'fetch failed');
    assert.equal((failure.cause as NodeJS.ErrnoException).code, 'ECONNREFUSED');
  });

  it("rejects with an aborted signal's reason, before the answer and while its body is read", async () => {
    const early = new AbortController();
    early.abort(new Error('early'));
    await assert.rejects(anyPortFetch(`${base}/echo`, { signal: early.signal }), /early/);
    const late = new AbortController();
    const res = await anyPortFetch(`${base}/hang`, { signal: late.signal });
    const reading = res.text();
    late.abort(new Error('late'));
    await assert.rejects(reading, /late/);
  });

  it("goes through the agent given for each URL, a redirect's to another origin included", async (t) => {
    const other = await serve();
    const otherBase = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
    const agents = new Map([base, otherBase].map((origin) => [origin, new CountingAgent()]));
    t.after(async () => {
      for (const agent of agents.values()) agent.destroy();
      await close(other);
    });
    const asked: string[] = [];
    const agent = (url: URL): Agent | undefined => (asked.push(url.href), agents.get(url.origin));
    const res = await anyPortFetch(`${base}/away?to=${otherBase}/echo`, { agent });
    assert.equal(res.status, 201);
    await res.text();
    assert.deepEqual(asked, [`${base}/away?to=${otherBase}/echo`, `${otherBase}/echo`]);
    assert.deepEqual(
      [...agents.values()].map((one) => one.connections),
      [1, 1],
    );
  });

  it('reaches a server on a port that fetch refuses', async (t) => {
    const blocked = await onBlockedPort((port) => serve(port));
    if (!blocked) return void t.skip(`every port of ${FETCH_BLOCKED_PORTS.join(', ')} is taken on this machine`);
    t.after(() => close(blocked.started));
    const url = `http://127.0.0.1:${blocked.port}/echo`;
    await assert.rejects(fetch(url), /fetch failed/);
    assert.equal((await anyPortFetch(url)).status, 201);
  });
});
