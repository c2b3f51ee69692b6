// Rotating the upstream token of direct mode without restarting anything,
// as separate processes on loopback: runtimes read the tokens their direct
// listener accepts from a file (directListen.tokenFile, as their chart
// mounts its Secret), the gateway reads the one it presents from another
// (upstreamTokenFile). The runtimes accept the old and the new token, the
// gateway's file is rewritten to the new one, then the old one is removed
// from the runtimes'; sessions on both runtimes carry on without an error,
// and a gateway still on the old token is refused from then on.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { until, type AppProcess } from '../support/processes.ts';
import {
  connect,
  counter,
  counterRounds,
  freePort,
  initializeBody,
  post,
  sessionsAcross,
  underTrafficUntilLogged,
  type AnyClient,
} from './support.ts';

const OLD = 'direct-token-old-0123456789abcdef';
const NEW = 'direct-token-new-0123456789abcdef';
const CHANGED = 'upstreamToken changed: runtimes are presented the new one';
const RUNTIME_TOKEN_REFUSED =
  "runtime refused this gateway's upstream token: set upstreamToken (or upstreamTokenFile) to one of the runtimes' directListen tokens";

describe('rotating the upstream token of direct mode', () => {
  let dir: string;
  let runtimesFile: string;
  let gatewayFile: string;
  let cluster: TestCluster;
  let gateway: AppProcess;
  const listeners: string[] = [];
  /** Writes the runtimes' tokens and waits until each direct listener has read them: it answers `token` with `status`. */
  const runtimesTake = async (tokens: string, token: string, status: 200 | 401): Promise<void> => {
    writeFileSync(runtimesFile, tokens);
    for (const listener of listeners) {
      await until(`${listener} answers ${status}`, async () => {
        const res = await fetch(`${listener}/healthz`, { headers: { authorization: `Bearer ${token}` } });
        await res.body?.cancel();
        return res.status === status || undefined;
      });
    }
  };
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-upstream-token-'));
    runtimesFile = join(dir, 'direct-tokens');
    gatewayFile = join(dir, 'upstream-token');
    writeFileSync(runtimesFile, `${OLD}\n`);
    writeFileSync(gatewayFile, `${OLD}\n`);
    cluster = await startCluster({ schedulers: 1, runtimes: 0, gateways: 0 });
    for (const id of ['r0', 'r1']) {
      const port = await freePort();
      listeners.push(`http://127.0.0.1:${port}`);
      await cluster.startRuntime(id, 0, {
        args: [
          ...['--direct-listen.enabled', 'true', '--direct-listen.host', '127.0.0.1'],
          ...['--direct-listen.port', String(port), '--direct-listen.token-file', runtimesFile],
        ],
      });
    }
    await cluster.waitForRuntimes(['r0', 'r1']);
    gateway = await cluster.addGateway(undefined, {
      args: ['--upstream-mode', 'direct', '--upstream-token-file', gatewayFile],
    });
  });
  after(async () => {
    await cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('moves the gateway to the new token while its sessions on both runtimes carry on, none refused', async () => {
    const url = `http://127.0.0.1:${gateway.port}/mcp`;
    const clients: AnyClient[] = [];
    const everyCounter = counterRounds(clients);
    try {
      assert.equal((await sessionsAcross(url, clients)).size, 2, 'sessions on both runtimes');
      await everyCounter('on the old token');
      await runtimesTake(`${OLD}\n${NEW}\n`, NEW, 200);
      await everyCounter('while the runtimes accept both');
      writeFileSync(gatewayFile, `${NEW}\n`);
      await underTrafficUntilLogged(gateway, CHANGED, everyCounter);
      await runtimesTake(`${NEW}\n`, OLD, 401);
      await everyCounter('after the old token was removed');
      const late = await connect('v2', url);
      clients.push(late);
      assert.equal(await counter(late), 1, 'a new session');
      assert.equal(gateway.logs.filter((l) => l.msg === CHANGED).length, 1);
      const errors = gateway.logs.filter((l) => (l.level as number) >= 40).map((l) => l.msg);
      assert.deepEqual(errors, []);
      const logged = JSON.stringify([...gateway.logs, ...cluster.runtimes.flatMap((r) => r.logs)]);
      assert.ok(!logged.includes(OLD) && !logged.includes(NEW), 'no token in a log');
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
  });

  it('refuses a gateway still on the old token once it is removed', async () => {
    const stale = await cluster.addGateway(undefined, { args: ['--upstream-mode', 'direct', '--upstream-token', OLD] });
    const reply = await post(`http://127.0.0.1:${stale.port}/mcp`, initializeBody());
    assert.equal(reply.status, 502, reply.text);
    await stale.waitForLog((l) => l.msg === RUNTIME_TOKEN_REFUSED && l.level === 50, 5_000);
  });
});
