// Node's fetch refuses the ports browsers block (6000, X11's; 6665-6669, IRC's; 10080, …) before it
// dials, saying only "bad port". A scheduler or gateway served on one is still a legitimate
// deployment: status, explain and both checks reach it like any other. Each listener here takes the
// first such port free on this machine; with none free, the tests are skipped saying so.
import { after, before, describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { FETCH_BLOCKED_PORTS, onBlockedPort } from '@switchyard/service/testing';
import { killGroup, runCli, spawnCli, startOneReplica, until, type Running } from './support.ts';

/** First ports of `up`'s three schedulers (it takes the two after too): 6000 and 6665-6667 are refused. */
const UP_FIRST_PORTS = [6000, 6665];
const INITIALIZED = {
  jsonrpc: '2.0',
  id: 1,
  result: { protocolVersion: '2025-06-18', serverInfo: { name: 'stand-in' } },
};

/** A stand-in gateway: ready, and answering an initialize with its result. */
function listenGateway(port: number): Promise<Server> {
  const server = createServer((req, res) => {
    req.resume();
    if (req.url === '/readyz') return void res.writeHead(200).end('ok');
    req.once('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(INITIALIZED)));
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

function skipUnless(t: TestContext, url: string | undefined): url is string {
  if (url === undefined) t.skip(`every port of ${FETCH_BLOCKED_PORTS.join(', ')} is taken on this machine`);
  return url !== undefined;
}

describe('switchyard status, explain and check on a port that fetch refuses', () => {
  let replica: SchedulerReplica | undefined;
  let gateway: Server | undefined;
  let schedulerUrl: string | undefined;
  let gatewayUrl: string | undefined;
  before(async () => {
    const scheduler = await onBlockedPort((port) => startOneReplica({ joinTokens: () => [] }, port));
    replica = scheduler?.started;
    schedulerUrl = scheduler && `http://127.0.0.1:${scheduler.port}`;
    const stand = await onBlockedPort(listenGateway);
    gateway = stand?.started;
    gatewayUrl = stand && `http://127.0.0.1:${stand.port}/mcp`;
  });
  after(async () => {
    await replica?.close();
    await new Promise((resolve) => (gateway ? gateway.close(resolve) : resolve(undefined)));
  });

  it('status reads the scheduler there', async (t) => {
    if (!skipUnless(t, schedulerUrl)) return;
    const { code, stdout, stderr } = await runCli(['status', '--scheduler', schedulerUrl]);
    assert.equal(code, 0, stderr);
    assert.match(stdout, /^leader: {3}s0 /m);
  });

  it('explain has the scheduler there trace a request', async (t) => {
    if (!skipUnless(t, schedulerUrl)) return;
    const { code, stdout, stderr } = await runCli([
      'explain',
      '--class',
      'demo',
      '--process',
      'p',
      '--scheduler',
      schedulerUrl,
    ]);
    // No runtime here: the dry run ends unschedulable (exit 1), but the scheduler answered it.
    assert.match(stdout, /STAGE +IN +OUT/, stderr);
    assert.match(stdout, /→ unschedulable at /);
    assert.equal(code, 1);
  });

  it('check scheduler passes on the scheduler there', async (t) => {
    if (!skipUnless(t, schedulerUrl)) return;
    const { code, stdout, stderr } = await runCli([
      'check',
      'scheduler',
      '--scheduler',
      schedulerUrl,
      '--wait-seconds',
      '10',
    ]);
    assert.equal(code, 0, stderr);
    assert.match(stdout, /^scheduler ok: leader s0 /);
  });

  it('check gateway passes on the gateway there', async (t) => {
    if (!skipUnless(t, gatewayUrl)) return;
    const { code, stdout, stderr } = await runCli(['check', 'gateway', '--gateway', gatewayUrl]);
    assert.equal(code, 0, stderr);
    assert.match(stdout, /^gateway ok: \/readyz 200, initialize 200 at .*\(stand-in, protocol 2025-06-18\)/);
  });
});

describe('switchyard up with its schedulers on ports that fetch refuses', () => {
  let up: Running | undefined;
  after(() => up && killGroup(up.child));

  // `up` waits until every scheduler lists both runtimes before it prints the URL.
  it('waits for them and prints the /mcp URL', async (t) => {
    const taken: string[] = [];
    for (const first of UP_FIRST_PORTS) {
      up = spawnCli(['up', '--scheduler-port', String(first), '--gateway-port', '0']);
      const running = up;
      const ready = await until(
        'the /mcp URL, or the exit of up',
        () =>
          /^ {2}http:\/\/127\.0\.0\.1:\d+\/mcp$/m.test(running.stdout())
            ? 'ready'
            : running.child.exitCode !== null && 'exited',
        30_000,
      );
      if (ready === 'ready') {
        process.kill(-running.child.pid!, 'SIGINT');
        assert.deepEqual(await running.exited, { code: 0, signal: null }, running.stderr());
        return;
      }
      await running.exited;
      if (!/address already in use|EADDRINUSE/i.test(running.stderr())) assert.fail(running.stderr());
      taken.push(`${first}-${first + 2}`);
    }
    t.skip(`the ports ${taken.join(' and ')} are taken on this machine`);
  });
});
