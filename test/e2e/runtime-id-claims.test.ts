// A runtime id connected to one scheduler replica, claimed at another by whoever holds some other join token:
// replicas publish with each runtime a fingerprint of the token its tunnel came with, so the claim is refused
// wherever it lands once an epoch shows the runtime, and its traffic (every tenant's tool calls) stays with it.
// The real runtime redialling another replica with its own token is admitted, as before. Separate processes on
// loopback, three replicas, the runtime on a follower: the claims go to the other follower and to the leader.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type http2 from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { dialTunnel } from '@switchyard/tunnel';
import { startCluster, type TestCluster } from '../support/cluster.ts';
import { until } from '../support/processes.ts';
import { upgradeStatus } from './raw-connections.ts';
import { connect, counter, whoami } from './support.ts';

const OTHER = 'another-join-token-0123456789abcdef';
const INFO = { id: 'r0', classes: ['demo'], metadata: {}, version: '1.0.0', limits: {} };

/** A dialer that claims `r0` at `url` with `token`, keeping whatever reaches it and the statuses it was refused. */
function impostor(url: string, token: string) {
  const received: string[] = [];
  const refusals: number[] = [];
  const quiet = () => {};
  const dialer = dialTunnel({
    url,
    token,
    info: INFO,
    handler: (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => {
      received.push(`${req.method} ${req.url}`);
      res.end('impostor');
    },
    logger: {
      info: quiet,
      warn: quiet,
      error: (fields: object) => refusals.push((fields as { status?: number }).status ?? 0),
    },
  });
  return { dialer, received, refusals };
}

/** The status of a bare connect for `r0` at `url` presenting `token` (the socket of a 101 is closed at once). */
function connectStatus(url: string, token: string): Promise<number> {
  return upgradeStatus(`${url}/api/runtime/connect`, {
    authorization: `Bearer ${token}`,
    'x-runtime-info': Buffer.from(JSON.stringify(INFO)).toString('base64url'),
  });
}

async function ownerOf(url: string): Promise<{ owner: string; generation: number }> {
  const res = await fetch(`${url}/api/runtime/r0`, { signal: AbortSignal.timeout(2000) });
  const { runtime } = (await res.json()) as { runtime: { owner: string; generation: number } };
  return { owner: runtime.owner, generation: runtime.generation };
}

describe('a runtime id connected to one replica and claimed at another', () => {
  let dir: string;
  let cluster: TestCluster;
  /** The runtime's replica, and the two others (the leader among them). */
  let owner: string;
  let others: string[];
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-id-claims-'));
    const tokens = join(dir, 'join-tokens');
    writeFileSync(tokens, `${OTHER}\n`);
    // Every replica takes the cluster's token and OTHER, an unscoped one (as a leaked token of another node).
    cluster = await startCluster({
      schedulers: 3,
      runtimes: 0,
      gateways: 1,
      schedulerArgs: ['--join-token-file', tokens],
    });
    const leader = await cluster.leader();
    const at = cluster.schedulers.findIndex((s) => s !== leader);
    await cluster.startRuntime('r0', at);
    await cluster.waitForRuntimes(['r0']);
    owner = `s${at}`;
    others = cluster.schedulers.filter((_, i) => i !== at).map((s) => s.url!);
  });
  after(async () => {
    await cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('is refused 409 there when it presents another join token, and the runtime keeps its traffic', async () => {
    const urls = cluster.schedulerUrls();
    const held = await Promise.all(urls.map(ownerOf));
    assert.ok(
      held.every((h) => h.owner === owner),
      `every replica shows r0 behind ${owner}`,
    );
    const claims = others.map((url) => impostor(url, OTHER));
    try {
      await until('both claims answered', () => claims.every((c) => c.refusals.length > 0 || c.dialer.connected));
      for (const claim of claims) {
        assert.equal(claim.dialer.connected, false, 'the impostor holds no tunnel');
        assert.equal(claim.refusals[0], 409);
      }
      const client = await connect('v2', cluster.gatewayUrl());
      try {
        assert.equal((await whoami(client)).runtime, 'r0');
        assert.equal(await counter(client), 1);
      } finally {
        await client.close();
      }
      assert.deepEqual(
        claims.flatMap((c) => c.received),
        [],
        'nothing meant for r0 reached an impostor',
      );
      assert.deepEqual(await Promise.all(urls.map(ownerOf)), held, 'r0 keeps the tunnel it had, on every replica');
    } finally {
      await Promise.all(claims.map((c) => c.dialer.close()));
    }
  });

  it('is admitted there when it presents the join token the runtime came with (the runtime redialling)', async () => {
    assert.equal(await connectStatus(others[0]!, cluster.token), 101);
  });
});
