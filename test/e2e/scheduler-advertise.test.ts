// A scheduler replica tells peers, gateways and runtimes' schedule answers
// where to reach it (advertiseUrl). Left unset, it advertises the address it
// listens on, or 127.0.0.1 when that is every interface, which serves a
// cluster on one machine; a replica listening on every interface (the default
// host) is meant to be reached from elsewhere, and the others would dial
// their own machine. A scheduler as a process.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnApp, until, type AppProcess } from '../support/processes.ts';
import { ipv6Missing } from './support.ts';

const WARNING = /advertises http:\/\/127\.0\.0\.1:\d+, an address only this machine can dial: set advertiseUrl/;
const BASE = ['--port', '0', '--join-tokens', 'a-join-token-0123456789abcdef', '--drain-delay-ms', '0'];

describe('a scheduler without advertiseUrl', () => {
  const started: AppProcess[] = [];
  after(() => Promise.all(started.map((s) => s.stop())));
  const start = async (name: string, args: readonly string[]): Promise<AppProcess> => {
    const scheduler = await spawnApp('scheduler', name, [...BASE, '--replica-id', name, ...args]);
    started.push(scheduler);
    return scheduler;
  };

  it('warns, listening on every interface, that others cannot dial what it advertises', async () => {
    const scheduler = await start('everywhere', []);
    const line = await scheduler.waitForLog((l) => WARNING.test(String(l.msg)), 5000);
    assert.equal(line.level, 40, 'a warning');
  });

  it(
    'advertises the one address it listens on, an IPv6 literal in brackets, which its peers can dial',
    { skip: ipv6Missing },
    async () => {
      const scheduler = await start('ipv6-loopback', ['--host', '::1']);
      assert.equal(scheduler.url, `http://[::1]:${scheduler.port}`);
      // Dialled at the URL it advertises, it names itself leader there: what peers and gateways are told.
      await until('the replica to lead at its advertised URL', async () => {
        const info = (await (await fetch(`${scheduler.url}/api/epoch`)).json()) as { leader: { url: string } | null };
        return info.leader?.url === scheduler.url;
      });
      assert.equal(scheduler.logs.filter((l) => WARNING.test(String(l.msg))).length, 0);
    },
  );

  it('says nothing when it listens on loopback only, or is told its URL', async () => {
    for (const [name, args] of [
      ['loopback', ['--host', '127.0.0.1']],
      ['told', ['--advertise-url', 'http://10.0.0.7:7070']],
    ] as const) {
      const scheduler = await start(name, args);
      // Logged before the listener is up, so by `ready` it would have been read.
      assert.equal(scheduler.logs.filter((l) => WARNING.test(String(l.msg))).length, 0, name);
      assert.ok(scheduler.logs.some((l) => l.msg === 'ready'));
    }
  });
});
