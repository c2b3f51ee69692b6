// Rotating the gateways' scheduler API token without restarting anything,
// as separate processes on loopback, in the order operators follow: the
// schedulers accept the old and the new token (their apiTokens file, as
// their chart mounts its Secret), the gateway's token file is rewritten to
// the new one (schedulerTokenFile, as its chart mounts its Secret), then the
// old one is removed from the schedulers'. The gateway presents the new
// token from its next request on, on new relay connections (those of the
// old token close once idle); the event streams the schedulers close
// because they were admitted with the old one come back on the new one, and
// sessions carry on without an error.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import type { AppProcess } from '../support/processes.ts';
import { until } from '../support/processes.ts';
import {
  connect,
  counter,
  counterRounds,
  metric,
  sessionsAcross,
  underTrafficUntilLogged,
  type AnyClient,
} from './support.ts';

const OLD = 'api-token-old-0123456789abcdef';
const NEW = 'api-token-new-0123456789abcdef';
const CHANGED = 'schedulerToken changed: schedulers are presented the new one';
const REVOKED = 'closed API connections and streams whose token was removed';

describe('rotating the scheduler API token', () => {
  let dir: string;
  let schedulersFile: string;
  let gatewayFile: string;
  let cluster: TestCluster;
  let gateway: AppProcess;
  /** Writes the schedulers' tokens and waits until every replica has read them: it answers `token` with `status`. */
  const schedulersTake = async (tokens: string, token: string, status: 200 | 401): Promise<void> => {
    writeFileSync(schedulersFile, tokens);
    for (const s of cluster.schedulers) {
      await until(`${s.name} answers ${status}`, async () => {
        const res = await fetch(`${s.url}/api/epoch`, { headers: { authorization: `Bearer ${token}` } });
        await res.body?.cancel();
        return res.status === status || undefined;
      });
    }
  };
  const sum = async (name: string): Promise<number> => {
    let total = 0;
    for (const s of cluster.schedulers) total += await metric(s.url!, name);
    return total;
  };
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-scheduler-token-'));
    schedulersFile = join(dir, 'api-tokens');
    gatewayFile = join(dir, 'scheduler-token');
    writeFileSync(schedulersFile, `${OLD}\n`);
    writeFileSync(gatewayFile, `${OLD}\n`);
    cluster = await startCluster({
      schedulers: 2,
      runtimes: 2,
      gateways: 0,
      apiToken: OLD,
      schedulerArgs: ['--api-token-file', schedulersFile],
    });
    gateway = await cluster.addGateway(undefined, { schedulerTokenFile: gatewayFile });
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
      await schedulersTake(`${OLD}\n${NEW}\n`, NEW, 200);
      await everyCounter('while the schedulers accept both');
      const relays = await sum('switchyard_scheduler_relay_connections_total');
      writeFileSync(gatewayFile, `${NEW}\n`);
      await underTrafficUntilLogged(gateway, CHANGED, everyCounter);
      assert.ok(
        (await sum('switchyard_scheduler_relay_connections_total')) > relays,
        'relays presenting the new token were opened as soon as the gateway read it',
      );

      await schedulersTake(`${NEW}\n`, OLD, 401);
      // Counted after the probes above, which present the old token on purpose.
      const refused = await sum('switchyard_scheduler_api_unauthorized_total');
      // What the gateway opened before it read the new token is closed by each replica now.
      for (const s of cluster.schedulers) await s.waitForLog((l) => l.msg === REVOKED, 10_000);
      await everyCounter('after the old token was removed');
      const late = await connect('v2', url);
      clients.push(late);
      assert.equal(await counter(late), 1, 'a new session');

      assert.equal(await sum('switchyard_scheduler_api_unauthorized_total'), refused, 'nothing it sent was refused');
      assert.equal(gateway.logs.filter((l) => l.msg === CHANGED).length, 1);
      const errors = gateway.logs.filter((l) => (l.level as number) >= 40).map((l) => l.msg);
      assert.deepEqual(errors, []);
      const logged = JSON.stringify(gateway.logs);
      assert.ok(!logged.includes(OLD) && !logged.includes(NEW), 'no token in its log');
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
  });
});
