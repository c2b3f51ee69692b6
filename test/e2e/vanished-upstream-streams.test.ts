// A legacy client's streams through the gateway binary (its session's GET
// stream and a POST's SSE answer during a long `sleep` call) when what is
// upstream of the gateway vanishes (powered off, its network gone: no FIN,
// no RST): the runtime holding the session, reached through its scheduler's
// tunnel or directly, or the scheduler replica relaying the streams. Each
// must end (so the client re-initializes or reopens it) within the pings and
// checks that watch that hop, not the kernel's retransmission timeout. The
// vanished app runs in a network namespace of its own; nftables then drops
// every packet of the namespace. Needs root, `ip` and `nft`; skipped with
// the reason otherwise.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createPartition, netnsUnavailable, type Partition } from '../chaos/netns.ts';
import { availableRuntimes, startCluster, type TestCluster } from '../support/cluster.ts';
import { spawnApp, until, type AppProcess } from '../support/processes.ts';
import { LEGACY, freePort, initializeBody, post } from './support.ts';

const DIRECT_TOKEN = 'direct-token-0123456789abcdef';
/** The namespace's end of the pair (netns.ts). */
const NS_ADDRESS = '169.254.213.2';

const unavailable = netnsUnavailable();
if (unavailable) console.log(`vanished-upstream-streams: skipped: ${unavailable}`);

interface Ends {
  /** Seconds from the cut to each stream's end; undefined while open. */
  get: number | undefined;
  post: number | undefined;
}

/** Opens the session's GET stream and a `sleep` call's SSE answer; `ends` records when each ends after `cutAt()`. */
async function openStreams(gatewayUrl: string, cutAt: () => number): Promise<Ends> {
  const init = await post(gatewayUrl, initializeBody());
  const session = { 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': LEGACY };
  await post(gatewayUrl, { jsonrpc: '2.0', method: 'notifications/initialized' }, session);
  const ends: Ends = { get: undefined, post: undefined };
  const follow = async (which: keyof Ends, init: RequestInit): Promise<void> => {
    const res = await fetch(gatewayUrl, init);
    assert.equal(res.status, 200, which);
    void (async () => {
      try {
        for await (const _ of res.body!);
      } catch {
        // a stream cut short ends here, as one ended
      }
      ends[which] = (performance.now() - cutAt()) / 1000;
    })();
  };
  await follow('get', { headers: { accept: 'text/event-stream', ...session } });
  const call = { name: 'sleep', arguments: { ms: 300_000 }, _meta: { progressToken: 1 } };
  await follow('post', {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...session },
    body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: call }),
  });
  return ends;
}

/** Cuts the namespace once both streams flow, and waits for both to end; resolves with the seconds each took. */
async function cutAndWait(
  partition: Partition,
  gatewayUrl: string,
  withinMs: number,
  onCut: () => void = () => {},
): Promise<Ends> {
  let cutAt = Infinity;
  const ends = await openStreams(gatewayUrl, () => cutAt);
  await new Promise((resolve) => setTimeout(resolve, 500));
  assert.deepEqual(ends, { get: undefined, post: undefined }, 'both streams open before the cut');
  cutAt = performance.now();
  partition.cut();
  onCut();
  await until('both streams ended', () => ends.get !== undefined && ends.post !== undefined, withinMs);
  return ends;
}

for (const mode of ['tunnel', 'direct'] as const) {
  describe(`the runtime holding a session vanishes (${mode} mode)`, { skip: unavailable }, () => {
    let cluster: TestCluster;
    let partition: Partition | undefined;
    before(async () => {
      partition = createPartition();
      cluster = await startCluster({ schedulers: 1, runtimes: 0, gateways: 0 });
      const port = await freePort();
      const direct = [
        ...['--direct-listen.enabled', 'true', '--direct-listen.host', '0.0.0.0', '--direct-listen.port', String(port)],
        ...['--direct-listen.token', DIRECT_TOKEN, '--direct-listen.advertise-url', `http://${NS_ADDRESS}:${port}`],
      ];
      const schedulerUrl = await partition.forward(cluster.schedulers[0]!.port!);
      await cluster.startRuntime('r0', 0, {
        schedulerUrl,
        wrapper: partition.wrapper,
        args: mode === 'direct' ? direct : [],
      });
      await cluster.waitForRuntimes(['r0']);
      await cluster.addGateway(undefined, {
        args: mode === 'direct' ? ['--upstream-mode', 'direct', '--upstream-token', DIRECT_TOKEN] : [],
      });
    });
    after(async () => {
      await cluster?.stop();
      await partition?.close();
    });

    it('ends its GET stream and its call stream at the gateway within the checks of that hop', async () => {
      let droppedAt: number | undefined;
      let watching: Promise<unknown> = Promise.resolve();
      const onCut = (): void => {
        const cutAt = performance.now();
        watching = until(
          'the scheduler to drop r0',
          async () => !(await availableRuntimes(cluster.schedulerUrls()[0]!)).includes('r0'),
          30_000,
        ).then(() => (droppedAt = (performance.now() - cutAt) / 1000));
      };
      // Tunnel: the replica's tunnel ping (1 s here) fails, and the tunnel's streams with it. Direct: the
      // gateway's `GET /healthz` check (every 5 s) goes unanswered at the next one.
      const ends = await cutAndWait(partition!, cluster.gatewayUrl(0), mode === 'tunnel' ? 10_000 : 15_000, onCut);
      await watching;
      console.log(
        `vanished-upstream-streams ${mode}: scheduler dropped r0 after ${droppedAt!.toFixed(1)} s; streams ended after GET ${ends.get!.toFixed(1)} s, POST ${ends.post!.toFixed(1)} s`,
      );
    });
  });
}

describe('the scheduler replica relaying the streams vanishes (tunnel mode)', { skip: unavailable }, () => {
  let cluster: TestCluster;
  let partition: Partition | undefined;
  let scheduler: AppProcess | undefined;
  before(async () => {
    partition = createPartition();
    cluster = await startCluster({ schedulers: 0, runtimes: 0, gateways: 0 });
    const port = await freePort();
    const url = `http://${NS_ADDRESS}:${port}`;
    scheduler = await spawnApp(
      'scheduler',
      's0',
      [
        ...['--host', '0.0.0.0', '--port', String(port), '--advertise-url', url, '--replica-id', 's0'],
        ...['--election.backend', 'file', '--election.lease-file', join(cluster.dir, 'lease.json')],
        ...['--election.lease-duration-ms', '3000', '--election.renew-deadline-ms', '2000'],
        ...['--election.retry-period-ms', '500', '--join-tokens', cluster.token],
        ...['--tunnel.ping-interval-ms', '1000', '--drain-delay-ms', '0'],
      ],
      { wrapper: partition.wrapper },
    );
    await cluster.startRuntime('r0', 0, { schedulerUrl: url });
    await until('r0 on the replica', async () => (await availableRuntimes(url)).includes('r0'), 15_000);
    await cluster.addGateway([url]);
  });
  after(async () => {
    await scheduler?.stop(1000);
    await cluster?.stop();
    await partition?.close();
  });

  it('ends both streams at the gateway within its event-stream pings and upstream checks', async () => {
    // GET: on the gateway's HTTP/2 connection to the replica, pinged every 10 s, failed at the next round
    // unanswered; POST: on a relay connection, HTTP/1.1, whose replica's `GET /healthz` goes unanswered.
    const ends = await cutAndWait(partition!, cluster.gatewayUrl(0), 30_000);
    console.log(
      `vanished-upstream-streams replica: streams ended after GET ${ends.get!.toFixed(1)} s, POST ${ends.post!.toFixed(1)} s`,
    );
  });
});
