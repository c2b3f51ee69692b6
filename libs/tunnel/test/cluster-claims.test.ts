// A runtime id that another scheduler replica holds a live tunnel for (as this replica's view of the cluster
// shows, with the fingerprint of the join token that tunnel came with) is not taken by a connect here that
// presents another token. A real endpoint on loopback; the view is a map the test fills.
import { after, afterEach, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { hash } from 'node:crypto';
import type http2 from 'node:http2';
import { joinTokenFingerprint, type TunnelDialer } from '../src/index.ts';
import { TOKEN, encodeInfo, rawConnect, runtimeInfo, startRuntime, startScheduler } from './helpers.ts';
import type { Scheduler } from './helpers.ts';

const OTHER = 'other-join-token-0123456789';

const hello = (_req: http2.Http2ServerRequest, res: http2.Http2ServerResponse): void => void res.end('hello');

describe('join token fingerprints', () => {
  it('are short, the same for one token, and neither the token nor its plain SHA-256', () => {
    const fingerprint = joinTokenFingerprint(TOKEN);
    assert.match(fingerprint, /^[A-Za-z0-9_-]{16}$/);
    assert.equal(joinTokenFingerprint(TOKEN), fingerprint);
    assert.notEqual(joinTokenFingerprint(OTHER), fingerprint);
    assert.ok(!fingerprint.includes(TOKEN.slice(0, 8)));
    // Domain-separated: not a prefix of what the endpoint keeps (the token's SHA-256), nor of its hash again.
    const digest = hash('sha256', TOKEN, 'buffer');
    assert.ok(!digest.toString('base64url').startsWith(fingerprint));
    assert.ok(!hash('sha256', digest, 'base64url').startsWith(fingerprint));
  });
});

describe('a runtime id claimed at another replica', () => {
  let scheduler: Scheduler;
  /** runtime id → fingerprint, as a view of the cluster would show live tunnels at other replicas. */
  const elsewhere = new Map<string, string | undefined>();
  const dialers: TunnelDialer[] = [];
  before(async () => {
    scheduler = await startScheduler({ tokens: () => [TOKEN, OTHER], claimedElsewhere: (id) => elsewhere.get(id) });
  });
  afterEach(() => {
    for (const d of dialers.splice(0)) void d.close();
    elsewhere.clear();
  });
  after(() => scheduler.close());

  const connect = (token: string, id: string) =>
    rawConnect(scheduler, { authorization: `Bearer ${token}`, 'x-runtime-info': encodeInfo(runtimeInfo(id)) });

  it('is refused 409 for another token, with the body and warning of a claim held here', async () => {
    elsewhere.set('rt-away', joinTokenFingerprint(TOKEN));
    const claim = await connect(OTHER, 'rt-away');
    assert.equal(claim.status, 409);
    assert.deepEqual(JSON.parse(claim.body), {
      error: 'runtime id connected with another join token',
      runtime: 'rt-away',
    });
    const said = scheduler.logs.find((l) => l.msg === 'runtime connect refused: id held by another join token');
    assert.equal(said?.level, 'warn');
    assert.deepEqual(said.obj, {
      remote: '127.0.0.1',
      runtime: 'rt-away',
      status: 409,
      error: 'runtime id connected with another join token',
      elsewhere: true,
    });
    assert.equal(scheduler.endpoint.get('rt-away'), undefined);
  });

  it('is admitted for the token that tunnel came with (the runtime redialling another replica)', async () => {
    elsewhere.set('rt-moved', joinTokenFingerprint(TOKEN));
    const { dialer, tunnel } = await startRuntime(scheduler, 'rt-moved', hello);
    dialers.push(dialer);
    assert.equal(tunnel.tokenFingerprint, joinTokenFingerprint(TOKEN), 'the tunnel carries its own to publish');
  });

  it('is admitted for any token when the view shows no fingerprint (a replica of an earlier release) or no claim', async () => {
    elsewhere.set('rt-old', undefined);
    assert.equal((await connect(OTHER, 'rt-old')).status, 101);
    assert.equal((await connect(OTHER, 'rt-free')).status, 101);
  });
});
